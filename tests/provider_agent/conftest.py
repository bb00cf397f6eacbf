"""The provider-agent fixtures (tests/support/provider_market.py): the session chain as just
deployed, a provider keystore, a renter acting through anvil's unlocked account, settings.

The other names below are re-exported for tests that still import them from here; new tests
import them from tests.support."""

from __future__ import annotations

import provider_agent  # noqa: F401  first: sets OMP_WAIT_POLICY before torch is loaded

from tests.support.accounts import PROVIDER_KEY  # noqa: F401
from tests.support.models import put, save_onnx, save_torchscript  # noqa: F401
from tests.support.provider_market import (  # noqa: F401
    ETH,
    PASSWORD,
    Market,
    keystore,
    market,
    password_file,
    settings_for,
)
from unchained_cli.chain import REPO_ROOT as REPO  # noqa: F401
