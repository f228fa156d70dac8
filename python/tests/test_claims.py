"""moesim.claims against `moesim claims --json` of the same build."""
import json

import pytest

import moesim


def test_claims_are_the_cli_json(cli, tmp_path):
    want = json.loads(cli("claims", "--only", "fmoe-entropy", "--requests", 4, "--no-sensitivity", "--json",
                          "--out", tmp_path / "cli").stdout)
    got = moesim.claims("fmoe-entropy", requests=4, sensitivity=False)
    assert len(got) == len(want) == 1
    assert got.to_dict("records") == want or json.loads(got.to_json(orient="records")) == want
    assert got["verdict"].iloc[0] in ("holds", "direction only", "does not hold")


def test_claims_keeps_its_outputs_in_out_dir(tmp_path):
    moesim.claims(["fmoe-entropy"], requests=4, sensitivity=False, out_dir=tmp_path / "o")
    assert (tmp_path / "o" / "claims.csv").exists() and (tmp_path / "o" / "claims_values.csv").exists()


@pytest.mark.parametrize("kw,cls,match", [
    (dict(only="nosuch"), moesim.Error, "nosuch: no such claim or paper"),
    (dict(only="fmoe-entropy", requests=2), moesim.ArgumentError, "requests=2"),
    (dict(only=3), moesim.ArgumentError, "only=3"),
])
def test_claims_errors(kw, cls, match):
    with pytest.raises(cls, match=match):
        moesim.claims(**kw)
