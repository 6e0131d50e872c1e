"""``Reader``: a declared setting's value from Scrapy's settings, parsed by its declared parser.

Reading a name the declaration (:mod:`.declared`) does not have is a
``KeyError``: the code cannot read a setting that is not declared.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy.settings import SETTINGS_PRIORITIES, BaseSettings

from productcrawler.config.addon import ENVIRONMENT_PRIORITY
from productcrawler.config.declared import DECLARED
from productcrawler.config.values import ConfigError

if TYPE_CHECKING:
    from collections.abc import Mapping


class Reader:
    """Parsed values of one set of settings.

    A plain mapping (a benchmark's or a test's few names) counts as project settings.
    """

    def __init__(self, settings: BaseSettings | Mapping[str, Any]) -> None:
        self.settings = (settings if isinstance(settings, BaseSettings)
                         else BaseSettings(dict(settings), priority="project"))

    def raw(self, name: str) -> Any:
        """The value as given; the declared default when it is unset."""
        value = self.settings.get(name)
        return DECLARED[name].default if value is None else value

    def __call__(self, name: str) -> Any:
        """The value parsed (ConfigError names the setting)."""
        setting = DECLARED[name]
        if setting.alias is not None:
            return self._aliased(name, setting.alias)
        return setting.parse(name, self.raw(name))

    def _aliased(self, ours: str, scrapys: str) -> Any:
        """The value of a setting that has a Scrapy setting of the same meaning.

        Both follow Scrapy's settings priorities: the one given at the higher
        priority wins (``-s RETRY_TIMES=0`` beats ``MAX_RETRIES`` from the
        environment or ``settings.py``). A default, ours or Scrapy's (priority
        "default"), never counts. Given at the same priority with different
        values they are refused: guessing would silently ignore one of them.
        """
        parse = DECLARED[ours].parse
        our_priority, their_priority = self._given_priority(ours), self.settings.getpriority(scrapys)
        given = self.raw(ours)
        value = parse(ours, given)
        if not their_priority:  # absent, or Scrapy's default
            return value
        theirs = parse(scrapys, self.settings.get(scrapys))
        if not our_priority or their_priority > our_priority:
            return theirs
        if their_priority == our_priority and theirs != value:
            raise ConfigError(f"{scrapys}={self.settings.get(scrapys)!r} and {ours}={given!r} "
                              f"disagree; give only one of them ({ours} is this project's name)")
        return value

    def _given_priority(self, name: str) -> int:
        """The priority ``name`` was given at; 0 for its default (or when it is absent).

        The environment is the project's own configuration, as ``settings.py`` is:
        its values count at project priority, so that a Scrapy setting in
        ``settings.py`` and ours in the environment that disagree are refused.
        """
        priority = self.settings.getpriority(name) or 0
        return SETTINGS_PRIORITIES["project"] if priority == ENVIRONMENT_PRIORITY else priority
