"""The backend contract page (docs/backend-contract.md) is generated from the code and current."""

import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _generator():
    spec = importlib.util.spec_from_file_location(
        "gen_backend_contract", ROOT / "tools" / "gen_backend_contract.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_contract_page_is_current():
    gen = _generator()
    assert gen.main(["--check"]) == 0, (
        "docs/backend-contract.md is stale: a primitive that needs a kernel of every backend "
        "was added or changed (one declared with reference= does not change the page); run "
        "PYTHONPATH=$PWD python tools/gen_backend_contract.py and commit the page")


def test_contract_counts_every_primitive():
    import primflow as pf

    gen = _generator()
    rows = gen.kernel_rows()
    assert [r[0] for r in rows] == pf.primitives()
    assert all(r[3] for r in rows), "every primitive needs a doc (its semantics on the page)"
    required = len(gen.kernel_rows("required")) + len(gen.method_rows(True))
    defaulted = gen.kernel_rows("default")
    referenced = gen.kernel_rows("reference")
    assert len(gen.kernel_rows("required")) + len(defaulted) + len(referenced) == len(rows)
    assert not {r[0] for r in referenced} & set(gen.render().split("`")), (
        "primitives with a reference kernel are not listed on the page")
    assert all("optional, default " in r[3] for r in defaulted)
    # the page states the count; the target (65) holds since the kernels that follow
    # from others have defaults (backends/defaults.py): a new primitive that cannot be
    # composed raises the count, and this test then asks for a default or a decision
    page = gen.render()
    assert f"**Required: {required}**" in page
    assert required <= gen.TARGET, f"{required} required backend entries (target {gen.TARGET})"
    assert f"at most {gen.TARGET} required entries." in page
