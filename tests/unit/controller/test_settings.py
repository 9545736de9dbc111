import pytest
from click.testing import CliRunner

from controller import main
from controller.settings import Settings, SettingsError, parse_duration, parse_http_address
from placement import Policy, Strategy


@pytest.mark.parametrize(("text", "seconds"), [
    ("30s", 30), ("2m", 120), ("1h", 3600), ("1m30s", 90), ("500ms", 0.5), ("45", 45),
    ("0.5", 0.5), (12, 12),
])
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "abc", "10x", "1m 30s", "m"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(SettingsError):
        parse_duration(text)


def test_defaults() -> None:
    s = Settings(namespace="openrl")
    assert s.device_class == s.device_driver == "gpu.example.com"
    assert (s.retry_interval, s.placement_timeout) == (30, 600)
    assert (s.reclaim_interval, s.reclaim_grace) == (60, 120)
    assert s.lease_namespace == "openrl" and s.lease_name == "open-rl-scheduler"
    assert s.leader_elect and s.http_address == ":8080" and s.log_format == "json"


def test_validation() -> None:
    with pytest.raises(SettingsError, match="retry-interval"):
        Settings(namespace="x", retry_interval="0s")
    with pytest.raises(SettingsError, match="namespace"):
        Settings(namespace="Not_A_Label")
    with pytest.raises(SettingsError, match="http-address"):
        Settings(namespace="x", http_address="8080")
    with pytest.raises(ValueError):
        Settings(namespace="x", log_format="xml")


def test_http_address() -> None:
    assert parse_http_address(":8080") == ("0.0.0.0", 8080)
    assert parse_http_address("127.0.0.1:0") == ("127.0.0.1", 0)
    assert parse_http_address("") is None


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> dict[str, Settings]:
    """The settings the command would run with, instead of running."""
    seen: dict[str, Settings] = {}

    def fake_run(settings: Settings, **_: object) -> int:
        seen["settings"] = settings
        return 0

    monkeypatch.setattr(main, "run", fake_run)
    monkeypatch.setattr(main, "configure", lambda *a, **k: None)
    monkeypatch.setattr(main.signal, "signal", lambda *a: None)
    return seen


def test_flags_fall_back_to_environment(seen: dict[str, Settings]) -> None:
    env = {"OPEN_RL_NAMESPACE": "gpus", "OPEN_RL_DEVICE_CLASS": "gpu.nvidia.com",
           "OPEN_RL_RETRY_INTERVAL": "5s", "OPEN_RL_LEADER_ELECT": "false",
           "OPEN_RL_LOG_FORMAT": "text"}
    result = CliRunner().invoke(main.command, ["--reclaim-grace", "10m"], env=env)
    assert result.exit_code == 0, result.output
    s = seen["settings"]
    assert s.namespace == "gpus" and s.lease_namespace == "gpus"
    assert s.device_class == s.device_driver == "gpu.nvidia.com"
    assert s.retry_interval == 5 and s.reclaim_grace == 600
    assert not s.leader_elect and s.log_format == "text"


def test_bad_flag_is_a_usage_error() -> None:
    result = CliRunner().invoke(main.command, ["--retry-interval", "soon"])
    assert result.exit_code == 2
    assert "not a duration" in result.output


def test_the_strategy_is_spread_unless_set_by_flag_or_environment(
        seen: dict[str, Settings]) -> None:
    assert Settings(namespace="openrl").policy == Policy(Strategy.SPREAD, owner_affinity=True)
    assert Settings(namespace="openrl", strategy="binpack").policy.strategy is Strategy.BINPACK
    with pytest.raises(SettingsError, match="strategy 'pack' is not one of spread, binpack"):
        Settings(namespace="openrl", strategy="pack")
    result = CliRunner().invoke(main.command, [], env={"OPEN_RL_STRATEGY": "binpack"})
    assert result.exit_code == 0, result.output
    assert seen["settings"].strategy == "binpack"
    refused = CliRunner().invoke(main.command, ["--strategy", "pack"])
    assert refused.exit_code == 2 and "'pack' is not one of 'spread', 'binpack'" in refused.output


def test_rebalance_after_is_five_minutes_zero_turns_moves_off(seen: dict[str, Settings]) -> None:
    assert Settings(namespace="openrl").rebalance_after == 300
    assert Settings(namespace="openrl", rebalance_after="0").rebalance_after == 0
    with pytest.raises(SettingsError, match="rebalance-after must be 0 \\(off\\) or more"):
        Settings(namespace="openrl", rebalance_after=-1)
    result = CliRunner().invoke(main.command, [], env={"OPEN_RL_REBALANCE_AFTER": "2m"})
    assert result.exit_code == 0, result.output
    assert seen["settings"].rebalance_after == 120
    result = CliRunner().invoke(main.command, ["--rebalance-after", "0"])
    assert result.exit_code == 0, result.output
    assert seen["settings"].rebalance_after == 0
    refused = CliRunner().invoke(main.command, ["--rebalance-after", "soon"])
    assert refused.exit_code == 2 and "not a duration" in refused.output


def test_drain_timeout_is_five_minutes_and_must_be_positive() -> None:
    assert Settings(namespace="openrl").drain_timeout == 300
    assert Settings(namespace="openrl", drain_timeout="90s").drain_timeout == 90
    with pytest.raises(SettingsError, match="drain-timeout"):
        Settings(namespace="openrl", drain_timeout=0)


def test_kueue_is_off_unless_asked_and_needs_kueues_api(seen: dict[str, Settings]) -> None:
    assert not Settings(namespace="openrl").kueue
    result = CliRunner().invoke(main.command, [], env={"OPEN_RL_KUEUE": "true"})
    assert result.exit_code == 0, result.output
    assert seen["settings"].kueue
    assert not CliRunner().invoke(main.command, []).exit_code and not seen["settings"].kueue


def test_kueue_on_without_kueues_api_stops_at_once_saying_so(
        caplog: pytest.LogCaptureFixture) -> None:
    from controller.k8s import kube

    class NoKueue:
        def serves(self, res: kube.Resource) -> bool:
            return res is not kube.WORKLOADS

    settings = Settings(namespace="openrl", kueue=True, http_address="", leader_elect=False)
    with caplog.at_level("ERROR", logger="openrl"):
        assert main.run(settings, api=NoKueue()) == 2  # type: ignore[arg-type]
    assert "does not serve Kueue's Workloads" in caplog.text
