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


@pytest.mark.parametrize("text, value", [("0", False), ("off", False), ("False", False), ("1", True), (" yes ", True)])
def test_a_switch_is_read_as_a_word_not_as_python_truth(text, value):
    # bool("0") would be True: the switch would stay on.
    assert options_from_environ({"MESSAGING_LOOP_DATABASE": text}) == {"LOOP_DATABASE": value}


def test_a_switch_that_is_neither_is_a_config_error():
    with pytest.raises(ImproperlyConfigured, match="MESSAGING_LOOP_DATABASE"):
        options_from_environ({"MESSAGING_LOOP_DATABASE": "maybe"})


@pytest.mark.parametrize("name", ["MEMBERS_ON_JOIN", "STATES_PER_RECEIPT", "INVITATIONS_LIST_LIMIT"])
def test_a_list_limit_below_one_is_a_config_error(name):
    # A join ack lists at least the joining member; a receipt tells at least one state;
    # `rooms.list` at least the newest invitation.
    with pytest.raises(ImproperlyConfigured, match=name):
        MessagingSettings(**{name: 0})
    assert getattr(MessagingSettings(**{name: 1}), name) == 1


def test_a_negative_wait_before_inviting_again_is_a_config_error():
    with pytest.raises(ImproperlyConfigured, match="REINVITE_AFTER"):
        MessagingSettings(REINVITE_AFTER=-1)
    assert MessagingSettings(REINVITE_AFTER=0).REINVITE_AFTER == 0
