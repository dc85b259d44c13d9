"""What each notebook needs: the runs, evaluations and looped decoders each notebook reads (their specs in
``needs``), declared once as a function of its parameters (``declarations``; the parameters cell and ``-p`` in
``parameters``), turned into the scheduler's jobs (``manifest``, the ``manifest`` command); and the helper the
notebooks import (``helper``)."""
