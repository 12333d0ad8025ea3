"""Admin APIs for access and the handshakes: ACLs without an authorizer, SCRAM
credentials, ApiVersions, and SASL on a plaintext listener."""

from __future__ import annotations

import pytest

from tests.differential import topic_steps as ts
from tests.differential.driver import Step
from tests.differential.scenario import Scenario, check, scenarios

pytestmark = pytest.mark.xdist_group("differential")

A = "admin"
T = "~t"


def scram_user_visible(name: str) -> Step:
    """Wait until the broker describes the user's credentials (Kafka's broker learns a
    change from the controller's metadata a moment after AlterUserScramCredentials)."""
    step = Step(A, 50, {"users": [{"name": name}]}, compare=False, label="credentials visible")
    step.wait_until = lambda r: all(result.error_code == 0 for result in r.results)
    return step


ACL_FILTER = {
    "resource_type_filter": 2,
    "resource_name_filter": None,
    "pattern_type_filter": 1,
    "principal_filter": None,
    "host_filter": None,
    "operation": 1,
    "permission_type": 1,
}

SCENARIOS = scenarios(
    # ---- ACLs with no authorizer configured
    Scenario(
        "acls without an authorizer",
        [
            Step(A, 29, ACL_FILTER),
            Step(
                A,
                30,
                {
                    "creations": [
                        {
                            "resource_type": 2,
                            "resource_name": T,
                            "resource_pattern_type": 3,
                            "principal": "User:alice",
                            "host": "*",
                            "operation": 3,
                            "permission_type": 3,
                        }
                    ]
                },
            ),
            Step(A, 31, {"filters": [ACL_FILTER]}),
        ],
    ),
    # ---- SCRAM credentials
    Scenario(
        "scram credentials",
        [
            Step(A, 50, {"users": [{"name": "~alice"}]}),
            Step(
                A,
                51,
                {
                    "deletions": [],
                    "upsertions": [
                        {
                            "name": "~alice",
                            "mechanism": 1,
                            "iterations": 8192,
                            "salt": b"salt",
                            "salted_password": b"x" * 32,
                        }
                    ],
                },
            ),
            scram_user_visible("~alice"),
            Step(A, 50, {"users": [{"name": "~alice"}, {"name": "~nobody"}]}),
            Step(
                A,
                51,
                {
                    "deletions": [{"name": "~alice", "mechanism": 2}],
                    "upsertions": [
                        {
                            "name": "~bob",
                            "mechanism": 1,
                            "iterations": 10,
                            "salt": b"s",
                            "salted_password": b"x" * 32,
                        }
                    ],
                },
            ),
            Step(
                A,
                51,
                {
                    "deletions": [{"name": "~alice", "mechanism": 1}],
                    "upsertions": [
                        {
                            "name": "~alice",
                            "mechanism": 1,
                            "iterations": 8192,
                            "salt": b"s",
                            "salted_password": b"y" * 32,
                        }
                    ],
                },
            ),
            Step(
                A,
                51,
                {
                    "deletions": [],
                    "upsertions": [
                        {
                            "name": "~carol",
                            "mechanism": 9,
                            "iterations": 8192,
                            "salt": b"s",
                            "salted_password": b"y" * 32,
                        }
                    ],
                },
            ),
            Step(A, 50, {"users": None}),
        ],
    ),
    # ---- handshakes
    Scenario(
        "api versions",
        [
            Step(A, 18, {"client_software_name": "diff", "client_software_version": "1.0"}, v)
            for v in (0, 1, 2, 3)
        ],
    ),
    Scenario(
        "api versions bad software name",
        [Step(A, 18, {"client_software_name": "bad name!", "client_software_version": "1.0"}, 3)],
    ),
    Scenario(
        "api versions unsupported version",
        [
            Step(
                A,
                18,
                {"client_software_name": "diff", "client_software_version": "1"},
                3,
                raw_version=99,
            )
        ],
    ),
    Scenario(
        "sasl handshake on a plaintext listener",
        [Step(A, 17, {"mechanism": "PLAIN"}, 1), Step(A, 17, {"mechanism": "GSSAPI"}, 0)],
    ),
    Scenario(
        "sasl authenticate without handshake",
        [Step(A, 36, {"auth_bytes": b"\0user\0pass"}, 2), ts.metadata(["~x"])],
    ),
)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda x: x.name)
def test_scenario(pair, scenario) -> None:
    check(pair, scenario)
