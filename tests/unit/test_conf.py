"""The app's options from the environment (`MESSAGING_<KEY>`), typed like their defaults."""
from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from messaging.conf import MessagingSettings, options_from_environ


def test_options_are_read_with_the_type_of_their_default():
    options = options_from_environ(
        {"MESSAGING_CLAIM_LEASE": "2", "MESSAGING_RATE_BURST": "5", "MESSAGING_REDIS_URL": "redis://x/0", "OTHER": "1"}
    )
    assert options == {"CLAIM_LEASE": 2.0, "RATE_BURST": 5, "REDIS_URL": "redis://x/0"}
    assert MessagingSettings(**options).RATE_BURST == 5


def test_a_number_that_is_not_one_is_a_config_error():
    with pytest.raises(ImproperlyConfigured, match="MESSAGING_RATE_BURST"):
        options_from_environ({"MESSAGING_RATE_BURST": "many"})
