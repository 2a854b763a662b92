"""The walk's count (lakeloader_dev.walk, docs/architecture.md): which steps are returns, and which are
lookups left out of the second count."""

from lakeloader_dev.walk import Walk


def walked() -> Walk:
    """a -> b -> c, a -> c again (a re-entry that goes on to d), c -> a (a callback), b -> e (a lookup)."""
    walk = Walk()
    walk.enter("a")
    for caller, callee, on_stack in (
        ("a", "b", False),
        ("b", "c", False),
        ("a", "c", False),
        ("c", "d", False),
        ("c", "a", True),
        ("b", "e", False),
        ("a", "b", False),  # the same step again adds nothing
    ):
        walk.step(caller, callee, on_stack)
    walk.leading_on |= {("a", "b"), ("b", "c"), ("a", "c")}
    return walk


def test_a_step_into_a_file_entered_before_is_a_return_and_one_on_the_stack_a_callback():
    walk = walked()
    assert walk.returning == ["", "", "re-entry", "", "callback", ""]
    assert walk.count(lookups=True) == (5, 6, 2, 1)


def test_without_lookups_a_step_no_call_went_on_from_is_left_out_but_a_callback_never_is():
    # left out: c -> d and b -> e (lookups); kept: a -> b, b -> c, a -> c (a re-entry), c -> a (a callback)
    assert walked().count(lookups=False) == (3, 4, 2, 1)
