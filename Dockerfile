# productcrawler: one crawl process per container; configuration by environment
# (the names of productcrawler/config/defaults.py). Build: docker build -t productcrawler .
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app

# Dependencies first: this layer is rebuilt only when requirements.txt changes.
COPY requirements.txt ./
RUN pip install --no-cache-dir -r requirements.txt

# A user of its own; it owns only data/ (the SQLite default, unused with MySQL).
RUN groupadd --gid 10001 crawler \
    && useradd --create-home --uid 10001 --gid crawler crawler \
    && mkdir /app/data \
    && chown crawler:crawler /app/data

COPY scrapy.cfg ./
COPY productcrawler ./productcrawler
# The bundled API simulator, a package of its own: docker-compose.yml runs it from this image.
COPY simulator ./simulator

# Numeric, so that runtimes (e.g. Kubernetes runAsNonRoot) can tell it is not root.
USER 10001:10001

# Only non-secret defaults here. DATABASE_URL, REDIS_URL, API_BASE_URL, API_KEY
# come from the environment at run time (docker run --env-file, compose, a secret
# store), or the key from a mounted secret file named by API_KEY_FILE.
# Metrics stay off unless METRICS_PORT is set; in a container they must listen
# on all interfaces to be reachable at all.
ENV METRICS_ADDRESS=0.0.0.0
EXPOSE 9410

CMD ["scrapy", "crawl", "products"]
