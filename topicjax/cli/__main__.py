"""``python -m topicjax.cli``: the ``topicjax`` command."""

import sys

from topicjax.cli import main

sys.exit(main())
