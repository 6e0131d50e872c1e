"""The guard: stop a crawl whose answers say the configuration is wrong, before a row is harmed.

``failure_guard`` is :class:`WholesaleFailureGuard`, one object that is both an
item pipeline (it holds outcomes back while a suspect streak lasts) and an
extension (it stops the crawl, exit 3); ``streaks`` defines the streaks and
their ERROR lines; ``field_drift`` is :class:`FieldDrift`, the extension that
stops a pass whose first answers lack a column the last complete pass had.
"""
