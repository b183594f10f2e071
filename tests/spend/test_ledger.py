"""The ledger alone: limits in force, what counts, what is reached and warned (no daemon)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from dsh.services.llm import Price
from dsh.spend import SpendConfig
from dsh.spend._ledger import Ledger, format_amount
from dsh.spend._plugin import stop_message


def test_limits_layer_config_then_session_then_run() -> None:
    ledger = Ledger(defaults=SpendConfig(session_usd=5, turn_tokens=100).limits())
    assert ledger.limits() == {"session_usd": 5.0, "turn_tokens": 100.0}
    ledger.set_override("session_usd", None)
    ledger.set_override("session_tokens", 1000)
    assert ledger.limits() == {"turn_tokens": 100.0, "session_tokens": 1000}
    ledger.set_run({"turn_usd": 0.5, "turn_tokens": 50})
    assert ledger.limits() == {"turn_usd": 0.5, "turn_tokens": 50, "session_tokens": 1000}


def test_turn_figures_restart_session_figures_add_up_and_unpriced_models_are_named() -> None:
    ledger = Ledger(defaults={"turn_tokens": 100, "session_usd": 1.0})
    price = Price(input=1_000.0, output=1_000.0)  # a tenth of a cent a token
    ledger.start_turn(1)
    ledger.add({"input_tokens": 60, "output_tokens": 10}, price, "a:m")
    assert (ledger.turn_tokens, ledger.session_tokens) == (70, 70)
    assert ledger.session_usd == pytest.approx(0.07)
    assert [r.budget for r in ledger.to_warn()] == []
    ledger.add({"input_tokens": 20, "output_tokens": 0}, None, "b:free")
    assert [r.budget for r in ledger.to_warn()] == ["turn_tokens"]  # 90 of 100
    assert ledger.unpriced == ["b:free"] and ledger.session_usd == pytest.approx(0.07)
    ledger.add({"input_tokens": 10}, None, "b:free")
    reached = ledger.reached()
    assert reached is not None and (reached.budget, reached.limit, reached.spent) == ("turn_tokens", 100, 100)
    assert ledger.to_warn() == []  # reached: the stop says it, not a warning
    ledger.start_turn(2)
    assert ledger.reached() is None and ledger.session_tokens == 100


def test_warned_once_and_the_session_s_warn_at_wins() -> None:
    ledger = Ledger(defaults={"session_tokens": 100}, warn_at=0.8)
    ledger.add({"input_tokens": 50}, None, None)
    ledger.set_override("warn_at", 0.5)
    assert [r.budget for r in ledger.to_warn()] == ["session_tokens"]
    ledger.said.add("warn:session_tokens")
    ledger.add({"input_tokens": 10}, None, None)
    assert ledger.to_warn() == []


def test_the_stop_message_names_the_budget_and_how_to_raise_it() -> None:
    ledger = Ledger(defaults={"session_usd": 2.0})
    ledger.session_usd = 2.0123
    reached = ledger.reached()
    assert reached is not None
    assert stop_message(reached) == (
        "Stopped: the session budget of $2 was reached ($2.0123 spent). "
        "Raise it with /budget session_usd 4 (or /budget session_usd off)."
    )
    assert format_amount("turn_tokens", 12345) == "12,345 tokens"
    assert format_amount("turn_usd", 0.5) == "$0.5"


def test_config_rejects_a_limit_that_is_not_positive_and_a_warn_at_above_one() -> None:
    with pytest.raises(ValidationError):
        SpendConfig.model_validate({"turn_usd": 0})
    with pytest.raises(ValidationError):
        SpendConfig.model_validate({"warn_at": 1.5})
    with pytest.raises(ValidationError):
        SpendConfig.model_validate({"session_dollars": 1})
    assert SpendConfig.model_validate({}).warn_at == 0.8
