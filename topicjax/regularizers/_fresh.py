"""Fingerprints of user plug-ins, so that a compiled program never outlives the values it read.

A regularizer ``R(phi, theta)`` (or a tuner objective, a traced schedule ``tau(iteration)``, the
``fn``/``update`` of :func:`~topicjax.regularizers.custom`) is a *static* part of the programs a
fit compiles: JAX traces it once and reuses the program while the static part compares equal.
Python values that ``R`` reads outside its arguments -- a module global ``scale``, a closure
cell, a default argument, an attribute of a captured object, a numpy array mutated in place, a
helper function that reads a global -- are baked into that program as constants.  Comparing
plug-ins by the identity of the function alone would reuse the program after such a value
changed, and the next fit would silently use the old value.

So every entry point, when it coerces its plug-ins (:func:`~topicjax.regularizers.as_regularizer`,
:func:`~topicjax.tune.objectives.as_objective`), wraps each user function in :class:`Fresh`: the
function *and* a :func:`fingerprint` of what it reads at that moment.  Two wrappers are equal
(and hash equal) only when both the function and the fingerprint are: an unchanged value reuses
the compiled program, a changed one compiles a new program that uses it.

What the fingerprint covers (:func:`fingerprint`):

* closure cells, ``__defaults__`` and ``__kwdefaults__`` of the function;
* the module globals it names (``__code__.co_names``, with those of nested lambdas and
  comprehensions) resolved in ``__globals__`` -- recursively into the plain Python functions it
  reaches (helpers, bound methods with their ``__self__``, ``functools.partial``, functions
  under ``jax.jit`` through ``__wrapped__``), at most :data:`MAX_DEPTH` levels of functions and
  attributes deep, each value once (cycles end there);
* numbers, strings, bytes, ``None`` by value; tuples, lists, dicts, sets by their elements;
  numpy and JAX arrays by shape, dtype and a SHA-1 hash of their bytes (so an array mutated
  in place is seen; hashing reads the array once, at every fit: measured on this project's
  2-core CPU machine, 50-70 ms for 1e7 float32 numbers (40 MB; a JAX array the same, after
  its copy to the host) and 120 ms for 1e7 float64, against about 10 µs for a function
  reading a few scalars);
* of an object (a ``SimpleNamespace``, a dataclass, an equinox module, the ``self`` of a
  method, a user module or class): its type by identity and the attributes whose names the
  code reads (``cfg.scale`` -> ``scale``), with the methods of it that the code names;
* modules, classes and functions of libraries (numpy, JAX, the standard library, installed
  packages, topicjax itself) by identity: their code does not change between fits (of
  topicjax's own closures, the cells are read too: they may hold the user's values).

What it cannot see, and what happens then: a value the walk cannot describe -- an object with
no attributes to read (its type, defined outside the libraries, has no ``__dict__`` and no
``__slots__``), an array of Python objects, a set of other than numbers and strings, a tracer,
a structure larger than :data:`MAX_NODES` values or deeper than :data:`MAX_DEPTH` -- is compared
by identity, and the first fingerprint that meets it warns once (a ``UserWarning`` naming the
plug-in and the variable): its later changes are not seen.  Identity (rather than never
caching) keeps every refit of an unchanged model compiled once, which is the point of
compiling; the warning makes the unsafe cases visible.  Attributes read through ``getattr(obj, "name")`` with a computed name, and
state inside library objects (a random generator), are not seen either.  A user's helper under
``jax.jit`` has JAX's own cache of its trace, which a recompiled outer program would reuse: its
trace is dropped (``clear_cache()``) when what it reads changed since its last fingerprint.
"""

from __future__ import annotations

import collections
import functools
import hashlib
import os
import sys
import sysconfig
import types
import warnings
import weakref

import numpy as np

#: Levels of functions and attributes followed from a plug-in (a helper of a helper ..., ``a.b.c``)
#: before a value is taken by identity.
MAX_DEPTH = 8

#: Values described in one fingerprint before the rest is taken by identity (with a warning).
MAX_NODES = 20_000

_LIBRARY_TOPS = frozenset({"topicjax", "jax", "jaxlib", "numpy", "equinox", "optax", "scipy", "ml_dtypes",
                           "builtins", "typing", "abc", "functools", "operator", "math", "collections"})
_SCALARS = (type(None), bool, int, float, complex, str, bytes, type(Ellipsis), type(NotImplemented), range, slice)
_WARNED: set = set()
_JIT_TRACES: dict = {}  # id of a user's jax.jit helper -> (reference, digest of what it read)


@functools.lru_cache(maxsize=None)
def _library_roots() -> tuple:
    paths = sysconfig.get_paths()
    roots = {os.path.realpath(paths[k]) for k in ("stdlib", "platstdlib", "purelib", "platlib") if paths.get(k)}
    return tuple(sorted(r + os.sep for r in roots))


@functools.lru_cache(maxsize=4096)
def _is_library(module_name) -> bool:
    """Code of module ``module_name`` is a library's (not the user's): not followed, by identity."""
    if not isinstance(module_name, str) or not module_name:
        return False
    top = module_name.split(".")[0]
    if top in _LIBRARY_TOPS or top in sys.builtin_module_names:
        return True
    mod = sys.modules.get(module_name) or sys.modules.get(top)
    path = getattr(mod, "__file__", None)
    if not path:
        return False
    path = os.path.realpath(path)
    return any(path.startswith(root) for root in _library_roots())


@functools.lru_cache(maxsize=4096)
def _code_names(code: types.CodeType) -> frozenset:
    """Every global and attribute name a code object (and the code nested in it) reads."""
    names = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            names |= _code_names(c)
    return frozenset(names)


class _Opaque(Exception):
    """Raised inside the walk for a value it cannot describe (taken by identity, with a warning)."""


class _Walk:
    """One fingerprint: a SHA-1 digest of a length-prefixed token stream, and references to the
    objects taken by identity (kept alive, so their ``id`` is not reused while the fingerprint is)."""

    def __init__(self, what: str, owner: str):
        self.h = hashlib.sha1(usedforsecurity=False)  # not a secret: the fastest on CPUs with SHA extensions
        self.keep: list = []
        self.seen: dict = {}
        self.alive: list = []  # everything in ``seen``, alive while the walk runs (ids stay unique)
        self.left = MAX_NODES
        self.exhausted = False
        self.what, self.owner = what, owner

    def tok(self, *parts):
        for p in parts:
            b = p if isinstance(p, bytes) else str(p).encode()
            self.h.update(len(b).to_bytes(8, "little"))
            self.h.update(b)

    def ident(self, x):
        self.keep.append(x)
        self.tok("id", id(x))

    def warn(self, path: str, x, why: str):
        key = (self.what, self.owner, path)
        if key not in _WARNED:
            _WARNED.add(key)
            warnings.warn(f"{self.what} {self.owner!r} reads {path!r} ({type(x).__name__}), which {why}: it is "
                          "compared by identity, so changes to its contents are not seen by a later fit (the "
                          "compiled program is reused); pass such data as the data of "
                          "topicjax.regularizers.custom(fn, data), or rebind the name to a new value",
                          UserWarning, stacklevel=5)

    # -- dispatch
    def value(self, x, path: str, names: frozenset, depth: int):
        self.left -= 1
        if isinstance(x, _SCALARS) and type(x) in _SCALARS:
            self.tok(type(x).__name__, repr(x))
            return
        if self.left < 0 or depth > MAX_DEPTH:
            self.ident(x)
            if not self.exhausted:  # said once per fingerprint, at the first value left out
                self.exhausted = True
                self.warn(path, x, f"is beyond what a fingerprint describes ({MAX_NODES} values, "
                                   f"{MAX_DEPTH} levels of functions and attributes)")
            return
        key = id(x)
        if key in self.seen:  # a cycle, or a value reached twice: the same value
            self.tok("seen", self.seen[key])
            return
        self.seen[key] = len(self.seen)
        self.alive.append(x)
        try:
            self._value(x, path, names, depth)
        except _Opaque as e:
            self.ident(x)
            self.warn(path, x, str(e))
        except Exception as e:  # noqa: BLE001 - a value that fails to describe itself: by identity, said once
            self.ident(x)
            self.warn(path, x, f"could not be fingerprinted ({type(e).__name__}: {e})")

    def _value(self, x, path, names, depth):
        if isinstance(x, _SCALARS):  # subclasses of int, str... (enums, numpy bools are np.generic)
            self.tok("scalar", type(x).__module__, type(x).__qualname__, repr(x))
            return
        if isinstance(x, (np.ndarray, np.generic)):
            self.array(np.asarray(x), path)
            return
        if _is_jax_array(x):
            self.jax_array(x, path)
            return
        if isinstance(x, (tuple, list, collections.deque, dict, types.MappingProxyType)) and len(x) > self.left:
            raise _Opaque(f"holds more values than a fingerprint describes ({MAX_NODES})")
        if isinstance(x, (tuple, list, collections.deque)):
            self.tok(type(x).__name__, len(x))
            for i, v in enumerate(x):
                self.value(v, f"{path}[{i}]", names, depth)
            return
        if isinstance(x, (dict, types.MappingProxyType)):
            self.tok(type(x).__name__, len(x))
            for k, v in list(x.items()):
                self.value(k, f"{path} key", names, depth)
                self.value(v, f"{path}[{k!r}]", names, depth)
            return
        if isinstance(x, (set, frozenset)):
            if not all(isinstance(v, _SCALARS) for v in x):
                raise _Opaque("is a set of values other than numbers and strings")
            self.tok(type(x).__name__, *sorted(f"{type(v).__name__}:{v!r}" for v in x))
            return
        if isinstance(x, bytearray):
            self.tok("bytearray", bytes(x))
            return
        if isinstance(x, types.FunctionType):
            self.function(x, path, depth)
            return
        if isinstance(x, types.MethodType):
            self.tok("method")
            self.value(x.__func__, path, names, depth + 1)
            inner = _code_names(x.__func__.__code__) if isinstance(x.__func__, types.FunctionType) else names
            self.value(x.__self__, f"{path}.__self__", inner, depth + 1)
            return
        if isinstance(x, functools.partial):
            self.tok("partial")
            self.value(x.func, f"{path}.func", names, depth + 1)
            self.value(x.args, f"{path}.args", names, depth)
            self.value(x.keywords, f"{path}.keywords", names, depth)
            return
        if isinstance(x, types.ModuleType):
            self.ident(x)
            if not _is_library(x.__name__):
                self.attributes(vars(x), x, path, names, depth)
            return
        if isinstance(x, type):
            self.ident(x)
            if not _is_library(x.__module__):
                self.attributes(vars(x), x, path, names, depth)
            return
        if isinstance(x, (types.BuiltinFunctionType, types.BuiltinMethodType, np.ufunc, np.dtype)):
            self.ident(x)
            return
        wrapped = getattr(x, "__wrapped__", None)
        if callable(x) and wrapped is not None and wrapped is not x:  # jax.jit(f), functools.wraps wrappers
            self.ident(x)
            if (hasattr(x, "clear_cache") and isinstance(wrapped, types.FunctionType)
                    and not _is_library(wrapped.__module__)):
                self.jitted(x, wrapped, path, names, depth)
            else:
                self.value(wrapped, f"{path}.__wrapped__", names, depth + 1)
            return
        if isinstance(x, Fresh):  # a wrapper met inside a plug-in: what its function reads now
            self.tok("fresh")
            self.value(x.fn, path, names, depth)
            return
        self.instance(x, path, names, depth)

    # -- kinds
    def array(self, a: np.ndarray, path: str):
        if a.dtype.hasobject:
            raise _Opaque("is an array of Python objects")
        self.tok("ndarray", a.dtype.str, a.shape)
        self.h.update(np.ascontiguousarray(a).reshape(-1).view(np.uint8))

    def jax_array(self, x, path: str):
        import jax

        if isinstance(x, jax.core.Tracer):
            raise _Opaque("is a traced value (the plug-in was coerced inside a JAX transformation)")
        if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
            self.tok("key", str(x.dtype))
            x = jax.random.key_data(x)
        if not getattr(x, "is_fully_addressable", True):
            raise _Opaque("is an array not held by this process")
        self.array(np.asarray(x), path)

    def jitted(self, f, wrapped, path: str, names: frozenset, depth: int):
        """A user's helper under ``jax.jit``: JAX keeps its own trace of it, which an outer
        program that is compiled again would reuse with the old values; so what it reads is
        fingerprinted on its own, and its trace is dropped when that changed since the last
        fingerprint (or was never taken: it may have been traced before)."""
        sub = _Walk(self.what, self.owner)
        sub.seen, sub.alive, sub.left = self.seen, self.alive, self.left
        sub.value(wrapped, f"{path}.__wrapped__", names, depth + 1)
        digest = sub.h.digest()
        self.keep.extend(sub.keep)
        self.left = sub.left
        self.tok("jit", digest)
        key = id(f)
        prev = _JIT_TRACES.get(key)
        if prev is None or prev[0]() is not f or prev[1] != digest:
            f.clear_cache()
        try:
            ref = weakref.ref(f)
        except TypeError:
            ref = (lambda f=f: f)
        _JIT_TRACES[key] = (ref, digest)

    def function(self, fn: types.FunctionType, path: str, depth: int):
        self.ident(fn)
        code = fn.__code__
        self.ident(code)  # a function whose __code__ was replaced is another function
        module = getattr(fn, "__module__", None)
        library = _is_library(module)
        if library and not (isinstance(module, str) and module.split(".")[0] == "topicjax"):
            return  # a library's function: its code and its globals are the library's
        names = _code_names(code)
        if fn.__defaults__:
            self.value(fn.__defaults__, f"{path} (default arguments)", names, depth)
        if fn.__kwdefaults__:
            self.value(fn.__kwdefaults__, f"{path} (keyword defaults)", names, depth)
        for var, cell in zip(code.co_freevars, fn.__closure__ or ()):
            try:
                content = cell.cell_contents
            except ValueError:  # a cell not yet filled
                self.tok("empty cell", var)
                continue
            self.tok("cell", var)
            self.value(content, var, names, depth + 1)
        if library:  # topicjax's own function: its closure carries user values, its globals do not
            return
        g = fn.__globals__
        for name in sorted(names):
            if name in g:
                self.tok("global", name)
                self.value(g[name], name, names, depth + 1)

    def instance(self, x, path: str, names: frozenset, depth: int):
        cls = type(x)
        d = getattr(x, "__dict__", None)
        slots = []
        for k in cls.__mro__:
            declared = getattr(k, "__slots__", ())
            slots += [declared] if isinstance(declared, str) else [s for s in declared if isinstance(s, str)]
        if d is None and not slots:
            if _is_library(cls.__module__):
                self.ident(x)  # a library object (a device, a generator...): by identity
                return
            raise _Opaque("is an object without attributes that a fingerprint can read")
        self.ident(cls)
        # methods of the object that the code names (and __call__ of a callable object): their
        # code reads more attributes of the object, and their globals count too
        inner = set(names)
        methods = []
        if not _is_library(cls.__module__):
            for name in sorted(names | {"__call__"}):
                m = getattr(cls, name, None)
                if isinstance(m, types.FunctionType) and (name != "__call__" or callable(x)):
                    methods.append((name, m))
                    inner |= _code_names(m.__code__)
        inner = frozenset(inner)
        for name, m in methods:
            self.tok("method", name)
            self.value(m, f"{path}.{name}", inner, depth + 1)
        attrs = dict(d) if d is not None else {}
        for s in slots:
            if s not in attrs and hasattr(x, s):
                attrs[s] = getattr(x, s)
        self.attributes(attrs, x, path, inner, depth)

    def attributes(self, attrs, x, path: str, names: frozenset, depth: int):
        for name in sorted(names):
            if name in attrs and not name.startswith("__"):
                self.tok("attr", name)
                self.value(attrs[name], f"{path}.{name}", names, depth + 1)


def _is_jax_array(x) -> bool:
    jax = sys.modules.get("jax")
    return jax is not None and isinstance(x, jax.Array)


def fingerprint(fn, *, what: str = "regularizer", owner: str | None = None) -> tuple[bytes, tuple]:
    """``(digest, kept)``: the digest of everything ``fn`` reads outside its arguments (see the
    module docstring) and the objects it took by identity (to be kept alive beside the digest).
    Values it cannot describe are taken by identity with a one-time ``UserWarning`` naming
    ``what`` ``owner`` (default: ``fn``'s name) and the variable."""
    walk = _Walk(what, owner or getattr(fn, "__name__", type(fn).__name__))
    walk.value(fn, walk.owner, frozenset({"__call__"}), 0)
    return walk.h.digest(), tuple(walk.keep)


def needs_fingerprint(fn) -> bool:
    """False for a library's plain function without closure or defaults (a pool member's
    criterion): nothing outside its arguments can change, and identity is the right equality."""
    if isinstance(fn, Fresh):
        return True
    if isinstance(fn, types.FunctionType):
        return not (_is_library(fn.__module__) and fn.__closure__ is None and not fn.__defaults__
                    and not fn.__kwdefaults__)
    return True


class Fresh:
    """A user function with the fingerprint of what it read when a fit coerced it: equal (and
    hashing equal) to another only for the same function AND the same fingerprint, so a compiled
    program that baked in a value is reused exactly while that value is unchanged.  Calls go to
    the function; :meth:`refreshed` re-reads the values (every entry point does, at each call)."""

    __slots__ = ("fn", "digest", "_key", "_kept", "_hash", "_what", "_owner")

    def __init__(self, fn, fingerprint_=None, *, what: str = "regularizer", owner: str | None = None, kept=()):
        if isinstance(fn, Fresh):
            fn = fn.fn
        self.fn = fn
        self._what, self._owner = what, owner
        if fingerprint_ is None:
            fingerprint_, kept = fingerprint(fn, what=what, owner=owner)
        self.digest = fingerprint_
        self._kept = tuple(kept)
        self._key = _identity(fn)
        self._hash = hash((type(self), self._key, fingerprint_))

    @property
    def __name__(self):
        return getattr(self.fn, "__name__", type(self.fn).__name__)

    @property
    def __wrapped__(self):  # inspect.signature and inspect.unwrap see the user's function
        return self.fn

    def refreshed(self, *, what: str | None = None, owner: str | None = None):
        """This wrapper if what ``fn`` reads is unchanged, else a new one with the new fingerprint."""
        what, owner = what or self._what, owner or self._owner
        digest, kept = fingerprint(self.fn, what=what, owner=owner)
        if digest == self.digest:
            return self
        return type(self)(self.fn, digest, what=what, owner=owner, kept=kept)

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)

    def __eq__(self, other):
        return type(other) is type(self) and other._key == self._key and other.digest == self.digest

    def __hash__(self):
        return self._hash

    def __reduce__(self):  # pickled without the kept references (re-read at the next fit anyway)
        return (_rebuild, (type(self), self.fn, self.digest, self._what, self._owner))

    def __repr__(self):
        return f"{type(self).__name__}({self.__name__!r})"


def _identity(fn) -> tuple:
    """What makes two plug-ins the same function: the object itself, or for a bound method (a new
    object at every ``obj.method``) its function and its ``self`` (both kept alive by ``fn``)."""
    if isinstance(fn, types.MethodType):
        return ("method", id(fn.__func__), id(fn.__self__))
    return ("object", id(fn))


def _rebuild(cls, fn, digest, what, owner):
    return cls(fn, digest, what=what, owner=owner)


def fresh(fn, *, what: str = "regularizer", owner: str | None = None, cls=Fresh):
    """``fn`` wrapped (or re-wrapped) with its current fingerprint as ``cls``; ``None`` and a
    library function that nothing outside its arguments can change come back as they are."""
    if fn is None:
        return None
    if isinstance(fn, cls):
        return fn.refreshed(what=what, owner=owner)
    if isinstance(fn, Fresh):
        fn = fn.fn
    if not needs_fingerprint(fn):
        return fn
    return cls(fn, what=what, owner=owner)
