"""The cost model: every job's price before it runs, in FLOPs and in seconds on a device."""
