from __future__ import annotations

import lemon_router
import lemon_router.testing


def test_all_is_sorted_and_complete() -> None:
    names = lemon_router.__all__
    assert names == sorted(names, key=lambda n: (not n.isupper(), not n[0].isupper(), n))
    for name in names:
        assert hasattr(lemon_router, name), name
    public = {
        n
        for n, v in vars(lemon_router).items()
        if not n.startswith("_") and getattr(v, "__module__", "").startswith("lemon_router.")
    }
    assert public - set(names) <= {"errors", "testing"}


def test_testing_module_exports() -> None:
    for name in lemon_router.testing.__all__:
        assert hasattr(lemon_router.testing, name)
