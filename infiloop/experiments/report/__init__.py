"""What the run leaves to read: the report page of a profile's notebooks (``build``, the ``report`` command; its HTML
pieces in ``markup``, its inputs read in ``summaries``, each notebook's own page in ``pages``, a claim's verdict in
``verdicts``, where the numbers come from in ``provenance``) and the README's results table (``results``)."""
