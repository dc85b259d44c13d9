"""What each notebook needs: the runs, evaluations and looped decoders each notebook reads, declared once as a
function of its parameters (``manifest``, the ``manifest`` command), and the helper the notebooks import
(``helper``)."""
