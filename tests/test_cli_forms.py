"""The CLI's answer form: schema -> fields, parsing typed text, and the form walk (R-B3).

The walk runs against a scripted prompter, so every path of the form is checked
without a terminal; tests/test_cli.py drives the real client in a pseudo-terminal.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

import pytest
import trio

from interlude.adapters.agent_scenarios import ADDRESS_SCHEMA, PURCHASE_SCHEMA
from interlude.adapters.cli_ask import FormAborted, ask_batch, describe_interrupt
from interlude.adapters.cli_console import visible
from interlude.adapters.cli_forms import (
    ArrayField,
    BoolField,
    ChoiceField,
    ConstField,
    IncompleteJSON,
    InputProblem,
    JsonField,
    NumberField,
    ObjectField,
    TextField,
    build_form,
    describe_problem,
    format_duration,
    hint,
    parse_bool,
    parse_choice,
    parse_json,
    parse_list,
    parse_number,
)
from interlude.core.json import FrozenDict, freeze
from interlude.core.state import Batch
from interlude.core.wire.messages import AssistantMessage, FunctionCall, ToolCall
from interlude.core.wire.run_input import Interrupt


def frozen(schema: dict[str, Any]) -> FrozenDict:
    value = freeze(schema)
    assert isinstance(value, FrozenDict)
    return value


# -- schema -> fields ----------------------------------------------------------------------


def test_purchase_schema_is_a_yes_no_and_an_optional_bounded_integer() -> None:
    form = build_form(frozen(PURCHASE_SCHEMA))
    assert isinstance(form, ObjectField)
    approved, quantity = form.fields
    assert isinstance(approved, BoolField) and approved.required and approved.key == "approved"
    assert isinstance(quantity, NumberField) and quantity.integer and not quantity.required
    assert hint(quantity) == "whole number, 1 to 10, Enter to skip"
    assert hint(approved) == "y/n"


def test_enum_is_numbered_choices() -> None:
    form = build_form(ADDRESS_SCHEMA)
    assert isinstance(form, ObjectField)
    (address,) = form.fields
    assert isinstance(address, ChoiceField)
    assert address.choices == ("address-123", "address-456")
    assert hint(address) == "1-2"


def test_nested_objects_and_arrays_recurse() -> None:
    schema = {
        "type": "object",
        "properties": {
            "note": {"type": "string", "title": "A note"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "ship": {
                "type": "object",
                "properties": {"street": {"type": "string"}, "zip": {"type": "number"}},
                "required": ["street"],
            },
            "lines": {
                "type": "array",
                "items": {"type": "object", "properties": {"sku": {"type": "string"}}},
            },
            "kind": {"const": "order"},
            "nothing": {"type": "null"},
        },
    }
    form = build_form(schema)
    assert isinstance(form, ObjectField)
    fields = {f.key: f for f in form.fields}
    assert isinstance(fields["note"], TextField) and fields["note"].title == "A note"
    tags = fields["tags"]
    assert isinstance(tags, ArrayField) and tags.scalar_items
    assert hint(tags) == "text, comma-separated, Enter to skip"
    ship = fields["ship"]
    assert isinstance(ship, ObjectField)
    assert [(f.name, f.required) for f in ship.fields] == [
        ("ship.street", True),
        ("ship.zip", False),
    ]
    lines = fields["lines"]
    assert isinstance(lines, ArrayField) and not lines.scalar_items
    assert isinstance(fields["kind"], ConstField) and fields["kind"].value == "order"
    assert isinstance(fields["nothing"], ConstField) and fields["nothing"].value is None


@pytest.mark.parametrize(
    ("schema", "reason"),
    [
        ({"anyOf": [{"type": "string"}, {"type": "integer"}]}, "anyOf"),
        ({"$ref": "#/$defs/x", "$defs": {"x": {"type": "string"}}}, "$defs"),
        ({"type": ["string", "null"]}, "list"),
        ({"type": "object"}, "free-form"),
        ({"type": "object", "additionalProperties": {"type": "string"}}, "additionalProperties"),
        ({"type": "array", "items": [{"type": "string"}]}, "items"),
        ({"type": "number", "exclusiveMinimum": True}, "exclusiveMinimum"),
        ({"enum": []}, "enum"),
        ({"description": "anything"}, "no type"),
        # Unhashable names: building the set of required keys raised TypeError.
        ({"type": "object", "properties": {"a": {}}, "required": [["a"]]}, "required"),
        ({"type": "object", "properties": {"a": {}}, "required": [{}]}, "required"),
    ],
)
def test_schemas_a_form_cannot_represent_become_free_json(
    schema: dict[str, Any], reason: str
) -> None:
    form = build_form(schema)
    assert isinstance(form, JsonField)
    assert reason in form.reason


def test_a_rich_property_is_json_inside_an_otherwise_simple_form() -> None:
    schema = {"type": "object", "properties": {"x": {"oneOf": [{"type": "string"}]}}}
    form = build_form(schema)
    assert isinstance(form, ObjectField)
    assert isinstance(form.fields[0], JsonField)


def test_deep_schemas_stop_being_forms() -> None:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(10):
        schema = {"type": "object", "properties": {"a": schema}}
    form = build_form(schema)
    while isinstance(form, ObjectField):
        form = form.fields[0]
    assert isinstance(form, JsonField) and "deeper" in form.reason


def test_no_schema_is_free_json() -> None:
    form = build_form(None)
    assert isinstance(form, JsonField) and "no response schema" in form.reason


def test_hints_name_exclusive_bounds_and_defaults() -> None:
    form = build_form({"type": "number", "exclusiveMinimum": 0, "default": 1.5})
    assert hint(form) == "number, > 0, Enter for 1.5"


# -- parsing -------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["y", "Yes", " TRUE ", "1", "t"])
def test_parse_bool_yes(text: str) -> None:
    assert parse_bool(text) is True


@pytest.mark.parametrize("text", ["n", "No", "false", "0"])
def test_parse_bool_no(text: str) -> None:
    assert parse_bool(text) is False


def test_parse_bool_other() -> None:
    with pytest.raises(InputProblem, match="y or n"):
        parse_bool("maybe")


def test_parse_number() -> None:
    assert parse_number(" 3 ", integer=True) == 3
    assert parse_number("1_000", integer=True) == 1000
    assert parse_number("2.5", integer=False) == 2.5
    assert parse_number("4", integer=False) == 4 and isinstance(
        parse_number("4", integer=False), int
    )
    with pytest.raises(InputProblem, match="whole number"):
        parse_number("2.5", integer=True)
    with pytest.raises(InputProblem, match="number"):
        parse_number("abc", integer=False)
    with pytest.raises(InputProblem, match="finite"):
        parse_number("inf", integer=False)


def test_parse_choice_by_number_or_value() -> None:
    choices = ("address-123", "address-456")
    assert parse_choice("2", choices) == "address-456"
    assert parse_choice("address-123", choices) == "address-123"
    assert parse_choice("20", (5, 10, 20)) == 20
    assert parse_choice("true", (True, None)) is True
    with pytest.raises(InputProblem, match="1 to 2"):
        parse_choice("3", choices)


def test_a_superscript_digit_at_a_choice_is_re_asked_not_a_crash() -> None:
    """str.isdigit() holds for "²", which int() refuses (ValueError, not InputProblem):
    the form stopped with a traceback instead of asking again."""
    with pytest.raises(InputProblem, match="1 to 2"):
        parse_choice("²", ("a", "b"))
    assert parse_choice("²", ("x", "²")) == "²"  # still chosen by its value
    entries, io = walk([ADDRESS], ["¹", "2"])
    assert entries[0]["payload"] == {"addressId": "address-456"}
    assert "choose a number from 1 to 2" in io.output


def test_parse_json() -> None:
    assert parse_json('{"approved": false}') == {"approved": False}
    assert parse_json("0") == 0
    with pytest.raises(IncompleteJSON):
        parse_json('{"approved":')
    with pytest.raises(InputProblem, match="not JSON"):
        parse_json("{oops}")
    with pytest.raises(InputProblem):
        parse_json("NaN")
    with pytest.raises(InputProblem):
        parse_json("   ")
    with pytest.raises(InputProblem, match="nested too deeply"):  # RecursionError, re-asked
        parse_json("[" * 100_000 + "]" * 100_000)


def test_parse_list() -> None:
    text = TextField(name="t", schema={"type": "string"})
    number = NumberField(name="n", schema={"type": "integer"}, integer=True)
    assert parse_list("a, b ,c", text) == ["a", "b", "c"]
    assert parse_list("1,2", number) == [1, 2]
    assert parse_list('["x, y", "z"]', text) == ["x, y", "z"]
    assert parse_list("", number) == []
    with pytest.raises(InputProblem, match="item 2"):
        parse_list("1, two", number)
    with pytest.raises(InputProblem, match="not JSON"):
        parse_list("[]x", number)


def test_describe_problem_names_the_field() -> None:
    assert describe_problem("data must be boolean", "approved") == "approved must be boolean"
    assert (
        describe_problem("data.quantity must be smaller than or equal to 10", "answer")
        == "quantity must be smaller than or equal to 10"
    )
    assert (
        describe_problem("data must contain ['approved'] properties", "answer")
        == "the answer must contain ['approved'] properties"
    )
    assert describe_problem("something else", "x") == "something else"


def test_format_duration() -> None:
    assert format_duration(4.9) == "5s"
    assert format_duration(299) == "4m 59s"
    assert format_duration(7500) == "2h 5m"
    assert format_duration(-3) == "0s"


# -- the form walk ---------------------------------------------------------------------------


class ScriptedPrompter:
    """Answers prompts from a list of lines (None: end of input) and keeps what was said."""

    def __init__(self, lines: Sequence[str | None]) -> None:
        self.lines = list(lines)
        self.prompts: list[str] = []
        self.said: list[str] = []

    async def ask(self, prompt: str) -> str | None:
        self.prompts.append(prompt)
        assert self.lines, f"the form asked more than scripted: {prompt!r}"
        return self.lines.pop(0)

    def say(self, text: str = "") -> None:
        self.said.append(text)

    @property
    def output(self) -> str:
        return "\n".join(self.said)


def interrupt(iid: str, schema: Any, message: str = "", **extra: Any) -> Interrupt:
    return Interrupt(
        id=iid,
        reason="input_required",
        message=message,
        response_schema=None if schema is None else frozen(schema),
        **extra,
    )


PURCHASE = interrupt("purchase", PURCHASE_SCHEMA, "Approve this purchase?")
ADDRESS = interrupt("shipping-address", ADDRESS_SCHEMA, "Which address?")


def walk(
    interrupts: Sequence[Interrupt], lines: Sequence[str | None], **kwargs: Any
) -> tuple[list[dict[str, Any]], ScriptedPrompter]:
    io = ScriptedPrompter(lines)
    batch = Batch("batch-1", tuple(interrupts))
    entries = trio.run(lambda: ask_batch(io, batch, now=1_800_000_000.0, **kwargs))
    assert not io.lines, f"lines left over: {io.lines}"
    return entries, io


def test_r_b3_one_form_for_the_whole_batch() -> None:
    entries, io = walk([PURCHASE, ADDRESS], ["y", "2", "1"])
    assert entries == [
        {
            "interrupt_id": "purchase",
            "status": "resolved",
            "payload": {"approved": True, "quantity": 2},
        },
        {
            "interrupt_id": "shipping-address",
            "status": "resolved",
            "payload": {"addressId": "address-123"},
        },
    ]
    assert "[1/2] Approve this purchase?" in io.output
    assert "2) address-456" in io.output


def test_optional_fields_can_be_skipped_and_a_denial_is_resolved() -> None:
    entries, _ = walk([PURCHASE], ["n", ""])
    assert entries == [
        {"interrupt_id": "purchase", "status": "resolved", "payload": {"approved": False}}
    ]


def test_cancel_makes_a_cancelled_entry_without_payload() -> None:
    entries, io = walk([PURCHASE, ADDRESS], ["cancel", "/cancel"])
    assert entries == [
        {"interrupt_id": "purchase", "status": "cancelled"},
        {"interrupt_id": "shipping-address", "status": "cancelled"},
    ]
    assert "purchase: cancelled" in io.output


def test_r_b3_invalid_answers_are_reasked_with_the_checkers_problems() -> None:
    entries, io = walk([PURCHASE], ["maybe", "y", "abc", "11", "0", "3"])
    assert entries[0]["payload"] == {"approved": True, "quantity": 3}
    out = io.output
    assert "answer y or n" in out
    assert "type a whole number" in out
    assert "quantity must be smaller than or equal to 10" in out
    assert "quantity must be bigger than or equal to 1" in out
    assert io.prompts.count("  quantity (whole number, 1 to 10, Enter to skip): ") == 4


def test_r_b3_free_json_is_checked_whole_and_reasked() -> None:
    rich = {
        "type": "object",
        "properties": {"approved": {"type": "boolean"}},
        "required": ["approved"],
        "anyOf": [{"required": ["approved"]}],
    }
    entries, io = walk([interrupt("x", rich)], ['{"approved": "yes"}', '{"approved":', " true}"])
    assert entries[0]["payload"] == {"approved": True}
    assert "Answer as JSON: it uses anyOf." in io.output
    assert "approved must be boolean" in io.output
    assert "Let's try this question again." in io.output


def test_a_schema_the_checker_rejects_is_answered_as_json_unchecked() -> None:
    hostile = {"$ref": "https://example.com/schema.json"}
    entries, io = walk([interrupt("x", hostile)], ['{"anything": 1}'])
    assert entries[0]["payload"] == {"anything": 1}
    assert "not checked here" in io.output


def test_without_schema_enter_sends_no_payload() -> None:
    entries, _ = walk([interrupt("x", None)], [""])
    assert entries == [{"interrupt_id": "x", "status": "resolved"}]


def test_nested_objects_arrays_and_defaults() -> None:
    schema = {
        "type": "object",
        "properties": {
            "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1},
            "ship": {
                "type": "object",
                "properties": {"street": {"type": "string", "minLength": 2}},
                "required": ["street"],
            },
            "lines": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "sku": {"type": "string"},
                        "n": {"type": "integer", "default": 1},
                    },
                    "required": ["sku"],
                },
            },
            "gift": {"type": "boolean", "default": False},
        },
        "required": ["tags", "ship", "lines"],
    }
    lines = ["", "red,", "blue", "y", "x", "Main St", "y", "A1", "", "y", "B2", "4", "n", ""]
    entries, io = walk([interrupt("order", schema)], lines)
    assert entries[0]["payload"] == {
        "tags": ["red", "blue"],
        "ship": {"street": "Main St"},
        "lines": [{"sku": "A1", "n": 1}, {"sku": "B2", "n": 4}],
        "gift": False,
    }
    assert "tags must contain at least 1 items" in io.output
    assert "ship.street must be longer than or equal to 2 characters" in io.output


def test_enter_at_a_required_text_or_list_field_with_a_default_gives_the_default() -> None:
    """The hint says "Enter for ..." for every field with a default; a required text or
    list field sent "" or [] instead."""
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "default": "Bob"},
            "tags": {"type": "array", "items": {"type": "string"}, "default": ["a"]},
        },
        "required": ["name", "tags"],
    }
    entries, io = walk([interrupt("q", schema)], ["", ""])
    assert '  name (text, Enter for "Bob"): ' in io.prompts
    assert entries[0]["payload"] == {"name": "Bob", "tags": ["a"]}
    entries, _ = walk([interrupt("q", {"type": "string", "default": "hi"})], [""])
    assert entries[0]["payload"] == "hi"
    entries, _ = walk([interrupt("q", {"type": "string"})], [""])
    assert entries[0]["payload"] == ""  # no default: a required text may be empty


def test_fixed_values_that_do_not_fit_the_schema_are_asked_as_json_not_looped() -> None:
    """A form of fixed values reads no line: when they fail the whole check, asking the
    same form again printed the same problems forever (Ctrl-C could not stop it)."""

    class Bounded(ScriptedPrompter):
        def say(self, text: str = "") -> None:  # the loop reaches no checkpoint: no timeout
            assert len(self.said) < 200, "the form says the same thing forever"
            super().say(text)

    fixed = {"type": "object", "properties": {"a": {"const": 1}}, "required": ["a"]}
    for schema, line, entry in [
        (
            {**fixed, "minProperties": 2},
            '{"a": 1, "b": 2}',
            {"interrupt_id": "q", "status": "resolved", "payload": {"a": 1, "b": 2}},
        ),
        ({"const": 1, "type": "string"}, "cancel", {"interrupt_id": "q", "status": "cancelled"}),
    ]:
        io = Bounded([line])
        batch = Batch("batch-1", (interrupt("q", schema),))
        assert trio.run(partial(ask_batch, io, batch, now=0.0)) == [entry]
        assert io.output.count("does not fit the schema") == 1
        assert "Answer as JSON ('cancel' cancels): its fixed values do not fit it." in io.output


def test_commands_inside_the_form() -> None:
    shown: list[str] = []
    entries, io = walk(
        [ADDRESS], ["/state", "/help", "2"], commands={"/state": lambda: shown.append("state")}
    )
    assert shown == ["state"]
    assert entries[0]["payload"] == {"addressId": "address-456"}
    assert "/new abandons them all" in io.output


@pytest.mark.parametrize(
    ("line", "command"), [("/new", "/new"), ("/quit", "/quit"), (None, "/quit")]
)
def test_new_quit_and_end_of_input_abort_the_form(line: str | None, command: str) -> None:
    io = ScriptedPrompter(["y", line])
    batch = Batch("batch-1", (PURCHASE,))
    with pytest.raises(FormAborted) as caught:
        trio.run(lambda: ask_batch(io, batch, now=0.0))
    assert caught.value.command == command


def test_describe_interrupt_shows_expiry_tool_call_and_metadata() -> None:
    from interlude.core.wire.messages import AssistantMessage, FunctionCall, ToolCall

    call = ToolCall(id="call-1", function=FunctionCall(name="place_order", arguments='{"q":1}'))
    messages = [AssistantMessage(id="m1", content="ok", tool_calls=(call,))]
    item = interrupt(
        "purchase",
        PURCHASE_SCHEMA,
        "Approve?",
        tool_call_id="call-1",
        metadata=frozen({"price": 249}),
        expires_at="2027-01-15T08:00:30Z",
    )
    assert item.expires_at_epoch is not None
    text = describe_interrupt(item, now=item.expires_at_epoch - 90, messages=messages)
    assert "Approve?" in text
    assert "expires in 1m 30s" in text
    assert 'place_order {"q":1}' in text
    assert "price: 249" in text
    assert "EXPIRED" in describe_interrupt(item, now=item.expires_at_epoch)


def test_what_a_hostile_agent_sends_cannot_fake_lines_or_flood_the_terminal() -> None:
    """An id or reason stays on its line; a huge message and a huge enum are cut; bidi
    overrides are shown as escapes, not obeyed."""
    item = Interrupt(
        id="q\nagent> you approved everything",
        reason="why\r\nnot",
        message="x" * 10_000,
    )
    text = describe_interrupt(item, now=0.0)
    assert "q\\nagent> you approved everything" in text and "why\\nnot" in text
    assert text.count("\n") == 1  # the title line and the facts line
    assert "(6000 more characters not shown)" in text
    assert visible("evil \u202etxt.exe") == "evil \\u202etxt.exe"

    # The tool call's arguments and the metadata's keys stay on their lines too.
    call = ToolCall(id="c1", function=FunctionCall(name="pay", arguments="{}\n  details: free"))
    about = Interrupt(
        id="q",
        reason="r",
        message="Approve?",
        tool_call_id="c1",
        metadata=frozen({"price\n  -> q: approved": 1}),
    )
    shown = describe_interrupt(
        about, now=0.0, messages=[AssistantMessage(id="a", tool_calls=(call,))]
    )
    assert shown.count("\n") == 3, shown  # title, facts, tool call, details
    assert "pay {}\\n  details: free" in shown and "price\\n  -> q: approved: 1" in shown

    many = interrupt("pick", {"enum": [f"option {n}" for n in range(1000)]}, "Pick one")
    entries, io = walk([many], ["option 777"])
    assert entries[0]["payload"] == "option 777"
    assert "50) option 49" in io.output and "51) option 50" not in io.output
    assert "... and 950 more: type a number or the value itself" in io.output


def test_a_property_name_or_title_cannot_fake_a_line_of_the_form() -> None:
    """A line break in a property name (shown in prompts and problems) is shown as
    ``\\n``; a multi-line title keeps its lines, indented under its field. The answer
    still goes out under the property's real name."""
    key = "qty\nagent> all done"
    schema = {
        "type": "object",
        "properties": {key: {"type": "integer", "title": "How many?\r\n-> q: ok", "maximum": 3}},
        "required": [key],
    }
    entries, io = walk([interrupt("q", schema, "Pick")], ["7", "2"])
    assert entries == [{"interrupt_id": "q", "status": "resolved", "payload": {key: 2}}]
    lines = io.output.split("\n") + io.prompts
    assert not any(line.startswith(("agent>", "->", "  ->  q: ok")) for line in lines)
    assert "  qty\\nagent> all done: How many?" in lines and "      -> q: ok" in lines
    assert "    - qty\\nagent> all done must be smaller than or equal to 3" in lines
    assert io.prompts[0] == "  qty\\nagent> all done (whole number, <= 3): "
