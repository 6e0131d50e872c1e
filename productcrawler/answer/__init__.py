"""The API's answer: where the product is in the JSON, and how its values are cleaned.

``payload`` finds the product and its fields in an answer (the default shapes,
or ``PRODUCT_FIELDS``); ``cleaning`` turns them into a ``ProductItem`` or says
why the answer is not a product. The spider (``spiders/products.py``) calls
both; neither is a Scrapy component.
"""
