"""The batch producer's transaction states: every (state, event) pair against a matrix written out here (not read
from the module's table), and the sequences BatchProducer walks through."""

from __future__ import annotations

import pytest

from transcoder.errors import TranscoderError
from transcoder.kafka.producer.transaction_state import (
    TRANSITIONS,
    TransactionManager,
    TransactionStateError,
    TxnEvent,
    TxnState,
)

# Rows: states; columns: the events in this order; a cell is the state moved to, "-" where the event is illegal.
_EVENTS = ["INIT", "INITIALIZED", "BEGIN", "ADD", "COMMIT", "ABORT", "END", "DOOM", "FAIL"]
_MATRIX = {
    #                  INIT    INITIALIZED BEGIN   ADD     COMMIT  ABORT   END     DOOM    FAIL
    "UNINITIALIZED": ["INITG", "-",        "-",    "-",    "-",    "-",    "-",    "-",    "-"],
    "INITIALIZING":  ["INITG", "READY",    "-",    "-",    "-",    "ABRTG", "-",   "INITG", "FATAL"],
    "READY":         ["-",     "-",        "READY", "INTXN", "COMTG", "ABRTG", "-", "ABERR", "FATAL"],
    "IN_TRANSACTION": ["-",    "-",        "-",    "INTXN", "COMTG", "ABRTG", "-",  "ABERR", "FATAL"],
    "COMMITTING":    ["-",     "-",        "-",    "-",    "COMTG", "ABRTG", "READY", "ABERR", "FATAL"],
    "ABORTING":      ["INITG", "-",        "-",    "ABRTG", "-",   "ABRTG", "ABRTG", "ABRTG", "FATAL"],
    "ABORTABLE_ERROR": ["-",   "-",        "-",    "ABERR", "-",   "ABRTG", "-",   "ABERR", "FATAL"],
    "FATAL_ERROR":   ["-",     "-",        "-",    "FATAL", "-",   "-",    "-",    "FATAL", "FATAL"],
}
_SHORT = {"INITG": "INITIALIZING", "READY": "READY", "INTXN": "IN_TRANSACTION", "COMTG": "COMMITTING",
          "ABRTG": "ABORTING", "ABERR": "ABORTABLE_ERROR", "FATAL": "FATAL_ERROR"}


def _expected(state: TxnState, event: TxnEvent) -> TxnState | None:
    cell = _MATRIX[state.name][_EVENTS.index(event.name)]
    return None if cell == "-" else TxnState[_SHORT[cell]]


def test_the_matrix_names_every_state_and_event():
    assert set(_MATRIX) == {s.name for s in TxnState}
    assert _EVENTS == [e.name for e in TxnEvent]
    assert all(len(row) == len(_EVENTS) for row in _MATRIX.values())


@pytest.mark.parametrize("state", list(TxnState), ids=lambda s: s.name)
@pytest.mark.parametrize("event", list(TxnEvent), ids=lambda e: e.name)
def test_every_state_and_event(state: TxnState, event: TxnEvent):
    m = TransactionManager("tid-1")
    m.state = state
    want = _expected(state, event)
    if want is None:
        with pytest.raises(TransactionStateError) as info:
            m.transition(event)
        assert m.state is state  # an illegal event moves nothing
        assert f"{event.value} in state {state.value}" in str(info.value)
        assert "tid-1" in str(info.value)
        assert isinstance(info.value, TranscoderError) and not info.value.retriable
    else:
        assert m.transition(event) is want
        assert m.state is want


def test_the_table_holds_only_the_matrix():
    legal = {(s, e): _expected(s, e) for s in TxnState for e in TxnEvent if _expected(s, e) is not None}
    assert legal == TRANSITIONS


def test_commit_and_abort_as_the_batch_producer_walks_them():
    m = TransactionManager("tid-1")
    m.transition(TxnEvent.INIT)
    m.initialized()
    m.transition(TxnEvent.BEGIN)
    assert m.state is TxnState.READY and not m.holds_anything
    m.added([("t", 0)])
    m.added([("t", 1)])
    m.added(offsets=True)
    assert m.state is TxnState.IN_TRANSACTION
    assert m.partitions == {("t", 0), ("t", 1)} and m.offsets and m.holds_anything
    m.transition(TxnEvent.COMMIT)
    m.transition(TxnEvent.COMMIT)  # asked again after a retriable failure
    m.ended()
    assert m.state is TxnState.READY and not m.holds_anything
    m.transition(TxnEvent.BEGIN)
    # the abort: purge, EndTxn, the epoch bump
    m.added([("t", 0)])
    m.transition(TxnEvent.ABORT)
    m.added([("t", 1)])  # the round in flight when the abort began
    assert m.partitions == {("t", 0), ("t", 1)}
    m.ended()
    m.transition(TxnEvent.INIT)
    m.initialized()
    assert m.state is TxnState.READY and not m.holds_anything and m.error is None


def test_a_doomed_transaction_keeps_its_first_reason_until_the_abort_bumps_the_epoch():
    m = TransactionManager("tid-1")
    m.transition(TxnEvent.INIT)
    m.initialized()
    m.added([("t", 0)])
    assert m.doom("first") is True
    assert m.doom("second") is False
    assert m.failed and m.error == "first" and m.state is TxnState.ABORTABLE_ERROR
    with pytest.raises(TransactionStateError):
        m.transition(TxnEvent.COMMIT)
    with pytest.raises(TransactionStateError):
        m.transition(TxnEvent.BEGIN)
    m.transition(TxnEvent.ABORT)
    assert m.doom("during the abort") is False and m.state is TxnState.ABORTING
    # EndTxn refused (fenced or timed out): no END; the epoch bump says which
    m.transition(TxnEvent.INIT)
    m.transition(TxnEvent.INIT)  # the bump failed retriably, asked again
    m.transition(TxnEvent.ABORT)  # the caller's abort again, after the bump failed
    m.ended()
    m.transition(TxnEvent.INIT)
    m.initialized()
    assert not m.failed and m.error is None and m.partitions == set()


def test_a_fatal_refusal_is_final_and_keeps_its_reason():
    m = TransactionManager("tid-1")
    m.transition(TxnEvent.INIT)
    m.fail("fenced")
    m.fail("again")
    assert m.state is TxnState.FATAL_ERROR and m.failed and m.error == "fenced"
    assert m.doom("late") is False and m.error == "fenced"
    for event in (TxnEvent.ABORT, TxnEvent.INIT, TxnEvent.BEGIN, TxnEvent.COMMIT):
        with pytest.raises(TransactionStateError):
            m.transition(event)


def test_nothing_added_moves_nothing():
    m = TransactionManager("tid-1")
    m.transition(TxnEvent.INIT)
    m.initialized()
    m.added(set())
    assert m.state is TxnState.READY


def test_a_fail_before_init_is_illegal_and_keeps_no_reason():
    m = TransactionManager("tid-1")
    with pytest.raises(TransactionStateError):
        m.fail("x")
    assert m.error is None and m.state is TxnState.UNINITIALIZED
