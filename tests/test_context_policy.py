"""The browser lever's choice of the context to rotate (pure: governor/context_policy.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pytest_crawlmem.governor.context_policy import MIN_SERVED_PAGES, ContextState, choose_rotation, closable

MIB = 2**20


def test_under_the_act_share_nothing_rotates():
    contexts = [ContextState("default", served=100, open_pages=2)]
    assert choose_rotation(84 * MIB, 100 * MIB, 0.85, contexts) is None
    assert choose_rotation(85 * MIB, 100 * MIB, 0.85, contexts) == contexts[0]


def test_the_context_that_served_the_most_pages_rotates_and_never_a_persistent_one():
    contexts = [ContextState("a", served=10, open_pages=1), ContextState("b", served=30, open_pages=0),
                ContextState("profile", served=90, open_pages=1, persistent=True)]
    assert choose_rotation(99 * MIB, 100 * MIB, 0.85, contexts) == contexts[1]


def test_no_rotation_while_a_rotated_context_still_closes_or_when_every_context_is_fresh():
    closing = [ContextState("a", served=50, open_pages=1, retiring=True), ContextState("a#2", served=9, open_pages=1)]
    assert choose_rotation(99 * MIB, 100 * MIB, 0.85, closing) is None
    fresh = [ContextState("a", served=MIN_SERVED_PAGES - 1, open_pages=2)]
    assert choose_rotation(99 * MIB, 100 * MIB, 0.85, fresh) is None


def test_a_rotated_context_closes_only_with_no_page_open_and_none_being_created():
    retired = ContextState("a", served=5, open_pages=0, retiring=True)
    assert closable(retired, creating=0)
    assert not closable(retired, creating=1)
    assert not closable(ContextState("a", served=5, open_pages=1, retiring=True), creating=0)
    assert not closable(ContextState("a", served=5, open_pages=0), creating=0)  # not rotated: it keeps serving


contexts_st = st.lists(st.builds(ContextState, name=st.text(min_size=1, max_size=5), served=st.integers(0, 100),
                                 open_pages=st.integers(0, 8), persistent=st.booleans(), retiring=st.booleans()),
                       max_size=6)


@given(tree=st.integers(0, 200 * MIB), contexts=contexts_st)
def test_a_chosen_context_is_always_one_that_may_rotate(tree, contexts):
    choice = choose_rotation(tree, 100 * MIB, 0.85, contexts)
    if choice is not None:
        assert tree >= 85 * MIB and choice in contexts
        assert not choice.persistent and choice.served >= MIN_SERVED_PAGES
        assert not any(c.retiring for c in contexts)


def test_over_the_close_share_the_pages_a_context_must_serve_fall_back_to_the_least():
    contexts = [ContextState("a", served=10, open_pages=1)]
    assert choose_rotation(90 * MIB, 100 * MIB, 0.85, contexts, min_served=64, hard_share=0.95) is None
    assert choose_rotation(95 * MIB, 100 * MIB, 0.85, contexts, min_served=64, hard_share=0.95) == contexts[0]
    assert choose_rotation(95 * MIB, 100 * MIB, 0.85, contexts, min_served=64) is None  # no close share given
    fresh = [ContextState("a", served=MIN_SERVED_PAGES - 1, open_pages=1)]
    assert choose_rotation(99 * MIB, 100 * MIB, 0.85, fresh, min_served=64, hard_share=0.95) is None
