"""A crawl process's life: checks before it starts, its name, its runtime, its exit code.

``preflight`` refuses bad configuration before Scrapy starts (exit 2, one
line); ``instance`` names this process among the instances of a pass;
``gc_tuning`` is :class:`GcTuning`, the extension that keeps the garbage
collector off the hot path; ``exit_status`` maps a crawl's finish reason to
the exit code.
"""
