"""What counts as a Redis URL: the used-token store and the request budget both accept one."""

from __future__ import annotations

REDIS_SCHEMES = ("redis://", "rediss://", "unix://")  # redis-py's Redis.from_url schemes


def is_redis(url: str | None) -> bool:
    return bool(url) and str(url).startswith(REDIS_SCHEMES)
