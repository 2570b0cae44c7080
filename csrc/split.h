// Work split of the kernels: contiguous ranges of rows of about equal weight, one per thread,
// cut only where the owner of the rows changes (a document, an item), so that everything an owner
// accumulates has one writer.  Used by the E-step (rows = pieces, owners = documents), the PTM
// kernels (rows = layout rows, owners = items) and the LIDA sweep (rows = the documents of a block,
// each its own owner).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace topicjax {

// Threads k = 0 .. nt-1 take rows [row_cut[k], row_cut[k+1]) and owners [owner_cut[k],
// owner_cut[k+1]); every owner of [0, n_owners) is owned once, with or without rows.
struct RangeSplit {
  int64_t nt = 1;
  std::vector<int64_t> row_cut, owner_cut;
};

// `owner[i]` is the owner of row i (non-decreasing; nullptr: row i is owner i); `weight[i]` the work
// of row i.  A cut placed at the first row past k/nt of the total weight moves forward to the next
// owner boundary.
inline RangeSplit SplitByWeight(const std::vector<int64_t>& weight, const int32_t* owner, int64_t n_rows,
                                int64_t n_owners, int64_t nt) {
  RangeSplit sp;
  sp.nt = nt = std::max<int64_t>(1, nt);
  sp.row_cut.assign(nt + 1, n_rows);
  sp.row_cut[0] = 0;
  if (nt > 1) {
    int64_t total = 0;
    for (int64_t i = 0; i < n_rows; ++i) total += weight[i];
    int64_t k = 1, acc = 0;
    for (int64_t i = 0; i < n_rows && k < nt; ++i) {
      while (k < nt && acc >= total * k / nt) {
        int64_t s = i;
        while (owner != nullptr && s > 0 && s < n_rows && owner[s] == owner[s - 1]) ++s;
        sp.row_cut[k] = std::max(s, sp.row_cut[k - 1]);
        ++k;
      }
      acc += weight[i];
    }
  }
  sp.owner_cut.assign(nt + 1, n_owners);
  sp.owner_cut[0] = 0;
  for (int64_t k = 1; k < nt; ++k) {
    const int64_t r = sp.row_cut[k];
    const int64_t o = r < n_rows ? (owner != nullptr ? owner[r] : r) : n_owners;
    sp.owner_cut[k] = std::min<int64_t>(std::max<int64_t>(o, sp.owner_cut[k - 1]), n_owners);
  }
  return sp;
}

}  // namespace topicjax
