"""The generated copies of the reducer's records (``state.replacer``, ``state.evolve``)."""

from __future__ import annotations

import attrs
import pytest

from interlude.core.state import _copier, evolve, replacer
from interlude.core.wire.messages import AssistantMessage


@attrs.frozen
class Checked:
    size: int = attrs.field(validator=attrs.validators.ge(0))


@attrs.frozen
class Converted:
    name: str = attrs.field(converter=str)


@attrs.frozen
class Hooked:
    value: int

    def __attrs_post_init__(self) -> None:
        pass


@pytest.mark.parametrize("cls", [Checked, Converted, Hooked])
def test_a_class_that_checks_its_fields_gets_no_generated_copy(cls: type) -> None:
    """Generated copies store values as given: a class with a validator, a converter or
    a post-init hook is refused when the copy is made, not skipped silently later."""
    field = attrs.fields(cls)[0].name
    with pytest.raises(TypeError, match="checks its fields"):
        replacer(cls, field)
    with pytest.raises(TypeError, match="checks its fields"):
        _copier(cls)


def test_generated_copies_equal_attrs_evolve() -> None:
    m = AssistantMessage(id="a", content="hi")
    assert replacer(AssistantMessage, "content")(m, "yo") == attrs.evolve(m, content="yo")
    assert evolve(m, content="yo", name="n") == attrs.evolve(m, content="yo", name="n")
    with pytest.raises(TypeError, match="has no field"):
        evolve(m, colour="red")
