"""A crawl process's runtime.

``gc_tuning`` is :class:`GcTuning`, the extension that keeps the garbage
collector off the hot path.
"""
