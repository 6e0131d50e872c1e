"""What ``scrapyd-deploy`` packs into the egg: the crawler package and nothing else.

scrapyd-deploy writes a setup.py with ``find_packages()`` when there is none,
and that would ship ``simulator`` and ``tests`` too. This one is the same
except that it names the package, so the egg holds only ``productcrawler``.
"""

from setuptools import find_packages, setup

setup(
    name="productcrawler",
    version="1.0",
    packages=find_packages(include=["productcrawler", "productcrawler.*"]),
    package_data={package: ["lua/*.lua"] for package in
                  ("productcrawler.budget", "productcrawler.passes", "productcrawler.proxies",
                   "productcrawler.ratelimit")},
    entry_points={"scrapy": ["settings = productcrawler.settings"]},
)
