"""What a profile trains: the profiles (``profiles``: data, models, steps, seeds, devices) and the connection
recipes that resolve a run's configuration and its hash (``recipes``)."""
