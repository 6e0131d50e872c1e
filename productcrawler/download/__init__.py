"""Sending a request: Scrapy's aiohttp download handler, lean, with the API's credentials.

``handler`` is :class:`LeanAiohttpDownloadHandler`, which adds ``API_AUTH`` /
``API_KEY`` / ``API_HEADERS`` to the API's own URLs on the way to the wire;
``errors`` says what each download error is raised as and named by (the
reasons in stats, logs and stored failures); ``tls`` verifies the API's
certificate (``API_TLS_VERIFY``, ``API_CA_FILE``) and words a refusal;
``stops`` is the crawl's stop, which the handler consults before sending.
The handler Scrapy is given (``DOWNLOAD_HANDLERS``) is its paced subclass in
``ratelimit/handler.py``, which waits for the rate limit's slot right before
sending.
"""
