"""The studies run through the same machinery as the notebooks, each declared as data and run by one mechanism
(``study``: its rows' jobs through the pipeline's scheduler, its results files, its docs block): the search for the
paper's contrast (``contrasts``; its candidate rows in ``contrast_rows``, its evidence over the recorded rows in
``contrast_drift``) and the study of the learned connection
(``connection_study``; its variants and blocks in ``connection_design``, its score verdict in ``score_verdict``)."""
