"""Retries: when to retry a product request, how long to hold it, and what to record on giving up.

``policy`` decides (:class:`~productcrawler.retry.policy.RetryPolicy`: the
delay of each retry, backoff or the server's ``Retry-After``, and the failure
to store once an id is given up); ``retry_after`` parses the ``Retry-After``
header; ``middleware`` is Scrapy's retry middleware extended to ask the policy
for each retry's delay (``ApiRetryMiddleware``, registered in ``settings.py``
under its module path). The scheduler enforces the delay (``passes/scheduler.py`` in a crawl, ``scheduler.py``
here for one-URL commands); the spider asks the
policy about 200s that are not products.
"""
