"""The studies run through the same machinery as the notebooks: the search for the paper's contrast
(``contrasts``; its candidate rows in ``contrast_rows``) and the study of the learned connection
(``connection_study``)."""
