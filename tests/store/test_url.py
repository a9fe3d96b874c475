"""A store's URL: memory or Redis, checked at start, never printed with its password."""

from __future__ import annotations

import pytest

from mockskill.store.url import BadStoreURL, checked, is_shared, masked


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://:s3cret@cache:6379/2", "redis://:***@cache:6379/2"),
        ("rediss://admin:s3cret@cache.example:6380/0", "rediss://admin:***@cache.example:6380/0"),
        ("redis://:pw@[::1]:6379", "redis://:***@[::1]:6379"),
        ("redis://cache:6379/0", "redis://cache:6379/0"),
    ],
)
def test_a_password_is_masked_wherever_the_url_is_shown(url: str, shown: str) -> None:
    assert masked(url) == shown
    assert "s3cret" not in masked(url)


@pytest.mark.parametrize("url", [None, "", "memory"])
def test_nothing_or_memory_is_the_embedded_store(url: str | None) -> None:
    assert checked(url) == "memory"
    assert not is_shared(url)


@pytest.mark.parametrize("url", ["redis://127.0.0.1:6379/0", "rediss://h:6380", "redis://h"])
def test_redis_urls_name_a_shared_store(url: str) -> None:
    assert is_shared(url)


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("postgres://:pw@db/1", "found the scheme 'postgres'"),
        ("localhost:6379", "found the scheme 'localhost'"),
        ("redis://:pw@/0", "names no host"),
        ("redis://h:port/0", "port is not a number"),
        ("redis://h:6379/cache", "'cache' is not a number"),
    ],
)
def test_a_bad_url_says_what_is_wrong_without_its_password(url: str, says: str) -> None:
    with pytest.raises(BadStoreURL) as raised:
        checked(url)
    assert says in str(raised.value)
    assert "pw" not in str(raised.value).replace("***", "")
