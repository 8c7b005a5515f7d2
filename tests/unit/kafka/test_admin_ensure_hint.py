"""kafka.admin.ensure on a topic that exists with another partition count: the error ends with the caller's fix,
never with an option of a command the caller may not be (`run` has no --partitions; issue 42)."""

from __future__ import annotations

import pytest

from tests.unit.kafka.test_admin_settle import NewTopicAdmin, _topic
from transcoder.errors import TopicError
from transcoder.kafka.admin import ensure


def test_partition_mismatch_names_no_command_line_option_by_default():
    admin = NewTopicAdmin("t.offset-map", [_topic("t.offset-map", [1, 1, 1])])
    with pytest.raises(TopicError) as info:
        ensure(admin, "t.offset-map", partitions=1)  # type: ignore[arg-type]
    assert str(info.value) == ("topic t.offset-map exists with 3 partitions, not the 1 asked for; "
                               "choose another topic")
    assert info.value.topic == "t.offset-map"
    assert admin.created == []


def test_partition_mismatch_ends_with_the_callers_fix():
    admin = NewTopicAdmin("s", [_topic("s", [1, 1])])
    with pytest.raises(TopicError) as info:
        ensure(admin, "s", partitions=4, fix="drop --partitions to use it as it is")  # type: ignore[arg-type]
    assert str(info.value) == ("topic s exists with 2 partitions, not the 4 asked for; "
                               "drop --partitions to use it as it is")
