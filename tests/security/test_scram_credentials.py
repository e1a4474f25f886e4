"""SCRAM credentials the KRaft way: --add-scram parsing, bootstrap records, the Describe/Alter handlers (#13)."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path
from types import SimpleNamespace

import pytest
import trio

from odradek.cli import main
from odradek.config import BrokerConfig
from odradek.handlers.scram_credentials import (
    alter_records,
    describe,
    handle_alter_user_scram_credentials,
)
from odradek.kraft.bootstrap import read_bootstrap, read_bootstrap_records
from odradek.kraft.store import MetadataStore
from odradek.security import Session
from odradek.security.acl import Denied, enforce
from odradek.security.sasl import credential_store
from odradek.security.scram import (
    ScramFormatError,
    ScramServer,
    credential_from_salted,
    parse_scram_argument,
    salted_password,
)
from odradek.wire.errors import ErrorCode
from odradek.wire.primitives import Uuid
from odradek.wire.protocol import request_class

AlterRequest = request_class(51)
DescribeRequest = request_class(50)
DIR_ID = Uuid.from_base64("yYuMrFRVQVSX0VVQPcMSrA")
SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")


# ------------------------------------------------------------------------------------------------
# --add-scram syntax (Kafka's ScramParser)
# ------------------------------------------------------------------------------------------------

def test_parse_password_and_salted_forms() -> None:
    mech, name, cred = parse_scram_argument("SCRAM-SHA-256=[name=alice,password=alice-secret]")
    assert (mech, name, cred.iterations, len(cred.salt)) == ("SCRAM-SHA-256", "alice", 4096, 16)
    assert cred == credential_from_salted(mech, salted_password(mech, b"alice-secret", cred.salt, 4096),
                                          cred.salt, 4096)
    salted = hashlib.pbkdf2_hmac("sha512", b"pencil", SALT, 8192)
    mech, name, cred = parse_scram_argument(
        f'SCRAM-SHA-512=[name="bob",iterations=8192,salt="{base64.b64encode(SALT).decode()}",'
        f'saltedpassword="{base64.b64encode(salted).decode()}"]')
    assert (mech, name, cred.salt, cred.iterations) == ("SCRAM-SHA-512", "bob", SALT, 8192)
    assert cred == credential_from_salted("SCRAM-SHA-512", salted, SALT, 8192)
    # a fixed salt with a password gives a reproducible credential
    _, _, a = parse_scram_argument(f"SCRAM-SHA-256=[name=c,password=p,salt={base64.b64encode(SALT).decode()}]")
    _, _, b = parse_scram_argument(f"SCRAM-SHA-256=[name=c,password=p,salt={base64.b64encode(SALT).decode()}]")
    assert a == b and a.salt == SALT


@pytest.mark.parametrize(("argument", "message"), [
    ("SCRAM-SHA-256", "Failed to find equals sign in SCRAM argument 'SCRAM-SHA-256'"),
    ("SCRAM-SHA-1=[name=a,password=b]", "The add-scram mechanism SCRAM-SHA-1 is not supported."),
    ("SCRAM-SHA-256=name=a,password=b]", "Expected configuration string to start with ["),
    ("SCRAM-SHA-256=[name=a,password=b", "Expected configuration string to end with ]"),
    ("SCRAM-SHA-256=[name=a,password]", "No equals sign found in SCRAM component: password"),
    ("SCRAM-SHA-256=[password=b]", "You must supply 'name' to add-scram"),
    ("SCRAM-SHA-256=[name=a]", "You must supply one of 'password' or 'saltedpassword' to add-scram"),
    ("SCRAM-SHA-256=[name=a,saltedpassword=AAAA]", "You must supply 'salt' with 'saltedpassword' to add-scram"),
    ("SCRAM-SHA-256=[name=a,password=b,colour=red]", "Unknown SCRAM configurations: colour"),
    ("SCRAM-SHA-256=[name=a,password=b,iterations=x]", "Failed to parse iterations count: x"),
    ("SCRAM-SHA-256=[name=a,password=b,salt=!!]", "Failed to decode given salt: !!"),
    ("SCRAM-SHA-256=[name=a,password=b,iterations=4095]",
     "The 'iterations' value must be >= 4096 for add-scram using SCRAM-SHA-256"),
    ("SCRAM-SHA-512=[name=a,password=b,iterations=16385]",
     "The 'iterations' value must be <= 16384 for add-scram using SCRAM-SHA-512"),
])
def test_parse_errors_like_kafka(argument: str, message: str) -> None:
    with pytest.raises(ScramFormatError) as info:
        parse_scram_argument(argument)
    assert str(info.value) == message


def test_storage_format_add_scram(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = tmp_path / "d"
    assert main(["storage", "format", "-t", "q1w2e3r4t5y6u7i8o9p0AA", "--override", f"log.dirs={d}",
                 "--add-scram", "SCRAM-SHA-256=[name=alice,password=alice-secret]",
                 "-S", "SCRAM-SHA-512=[name=alice,password=alice-secret,iterations=8192]"]) == 0
    records = read_bootstrap_records(d)
    # the feature levels first, then one UserScramCredentialRecord per argument, in order
    assert [r.name for r in records] == ["FeatureLevelRecord"] * 6 + ["UserScramCredentialRecord"] * 2
    assert [(r.message.name, r.message.mechanism, r.message.iterations) for r in records[6:]] == [
        ("alice", 1, 4096), ("alice", 2, 8192)]
    assert read_bootstrap(d)["metadata.version"] == 33
    # a bad argument: Kafka's message, nothing formatted
    bad = tmp_path / "bad"
    assert main(["storage", "format", "-t", "x", "--override", f"log.dirs={bad}",
                 "--add-scram", "SCRAM-SHA-256=[name=a,password=b,iterations=1]"]) == 1
    assert "must be >= 4096" in capsys.readouterr().err
    assert not (bad / "meta.properties").exists()

    # the first start copies them into the metadata log; a reopen replays them from there
    store = _store(d)
    assert set(store.scram_credentials()) == {(1, "alice"), (2, "alice")}
    store.close()
    snap = d / "__cluster_metadata-0" / "00000000000000000000-0000000000.checkpoint"
    snap.chmod(0o600)
    snap.unlink()  # read only for an empty log
    store = _store(d)
    assert set(store.scram_credentials()) == {(1, "alice"), (2, "alice")}
    broker = _broker(store)
    assert _login(broker, "SCRAM-SHA-512", "alice", "alice-secret")
    assert not _login(broker, "SCRAM-SHA-512", "alice", "wrong")
    store.close()


def test_first_start_copies_the_bootstrap_snapshot_into_the_log(tmp_path: Path) -> None:
    d = tmp_path / "d"
    assert main(["storage", "format", "-t", "q1w2e3r4t5y6u7i8o9p0AA", "--override", f"log.dirs={d}",
                 "--add-scram", "SCRAM-SHA-256=[name=alice,password=alice-secret]"]) == 0
    # format leaves the records as Kafka 4.4's does: the read-only bootstrap snapshot
    snapshot = d / "__cluster_metadata-0" / "00000000000000000000-0000000000.checkpoint"
    assert snapshot.exists() and not (d / "bootstrap.checkpoint").exists()
    assert [r.name for r in read_bootstrap_records(d)][-1] == "UserScramCredentialRecord"
    _store(d).close()
    # as Kafka 4.4 does: the log holds the bootstrap records, so they outlive the bootstrap snapshot
    snapshot.chmod(0o600)
    snapshot.unlink()
    store = _store(d)
    assert set(store.scram_credentials()) == {(1, "alice")}
    assert store.image.features.get("share.version") == 2
    store.close()


# ------------------------------------------------------------------------------------------------
# handlers
# ------------------------------------------------------------------------------------------------

def _store(path: Path) -> MetadataStore:
    clock = iter(range(1_700_000_000_000, 1_800_000_000_000))
    store = MetadataStore(path, 1, {path: DIR_ID}, lambda: next(clock))
    store.listeners = [("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT")]
    store.start()
    return store


def _broker(store: MetadataStore | None, config: str = "") -> SimpleNamespace:
    props = {"odradek.sasl.scram.credentials": config} if config else {}
    return SimpleNamespace(config=BrokerConfig(props), metadata_store=store)


def _login(broker, mechanism: str, user: str, password: str) -> bool:
    """A full client-side SCRAM exchange against the broker's credential store."""
    import hmac

    algorithm = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mechanism]
    server = ScramServer(mechanism, credential_store(broker).lookup)
    try:
        first = server.evaluate(f"n,,n={user},r=clientnonce".encode()).decode()
    except Exception:
        return False
    fields = dict(item.split("=", 1) for item in first.split(","))
    salted = hashlib.pbkdf2_hmac(algorithm, password.encode(), base64.b64decode(fields["s"]), int(fields["i"]))
    client_key = hmac.new(salted, b"Client Key", algorithm).digest()
    stored = hashlib.new(algorithm, client_key).digest()
    without_proof = f"c=biws,r={fields['r']}"
    auth = f"n={user},r=clientnonce,{first},{without_proof}".encode()
    signature = hmac.new(stored, auth, algorithm).digest()
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature, strict=True))).decode()
    try:
        server.evaluate(f"{without_proof},p={proof}".encode())
    except Exception:
        return False
    return server.complete


def _upsert(name: str, password: str = "pw", mechanism: int = 1, iterations: int = 4096, salt: bytes = SALT):
    algorithm = {1: "sha256", 2: "sha512"}.get(mechanism, "sha256")
    return AlterRequest.ScramCredentialUpsertion(
        name=name, mechanism=mechanism, iterations=iterations, salt=salt,
        salted_password=hashlib.pbkdf2_hmac(algorithm, password.encode(), salt, max(iterations, 1)))


def _deletion(name: str, mechanism: int = 1):
    return AlterRequest.ScramCredentialDeletion(name=name, mechanism=mechanism)


def _alter(broker, deletions=(), upsertions=()) -> dict[str, tuple[int, str | None]]:
    request = AlterRequest(deletions=list(deletions), upsertions=list(upsertions))
    ctx = SimpleNamespace(broker=broker, principal="User:admin")
    response = trio.run(handle_alter_user_scram_credentials, ctx, None, request)
    users = [r.user for r in response.results]
    assert len(users) == len(set(users))
    return {r.user: (r.error_code, r.error_message) for r in response.results}


def _describe(broker, users=None) -> dict[str, tuple[int, list[tuple[int, int]]]]:
    response = describe(broker, users)
    assert response.error_code == 0
    return {r.user: (r.error_code, [(c.mechanism, c.iterations) for c in r.credential_infos])
            for r in response.results}


def test_alter_describe_persist_and_login(tmp_path: Path) -> None:
    store = _store(tmp_path)
    broker = _broker(store)
    assert _describe(broker) == {}
    assert _alter(broker, upsertions=[_upsert("alice", "secret-256"),
                                      _upsert("bob", "bob-pw", mechanism=2, iterations=8192)]) == {
        "alice": (0, None), "bob": (0, None)}
    assert _login(broker, "SCRAM-SHA-256", "alice", "secret-256")
    assert not _login(broker, "SCRAM-SHA-256", "alice", "other")
    assert not _login(broker, "SCRAM-SHA-512", "alice", "secret-256")  # no 512 credential
    assert _alter(broker, upsertions=[_upsert("alice", "secret-512", mechanism=2, iterations=4096)]) == {
        "alice": (0, None)}
    assert _describe(broker) == {"alice": (0, [(1, 4096), (2, 4096)]), "bob": (0, [(2, 8192)])}
    assert _describe(broker, ["bob", "nobody", "bob"]) == {
        "bob": (ErrorCode.DUPLICATE_RESOURCE, []), "nobody": (ErrorCode.RESOURCE_NOT_FOUND, [])}
    messages = {r.user: r.error_message for r in describe(broker, ["nobody"]).results}
    assert messages == {"nobody": "Attempt to describe a user credential that does not exist: nobody"}
    # the salted password is not kept, only StoredKey / ServerKey
    rec = store.scram_credentials()[(1, "alice")]
    assert rec.salt == SALT and len(rec.stored_key) == 32 and len(rec.server_key) == 32
    store.close()

    store = _store(tmp_path)  # a restart replays the records
    broker = _broker(store)
    assert _describe(broker) == {"alice": (0, [(1, 4096), (2, 4096)]), "bob": (0, [(2, 8192)])}
    assert _login(broker, "SCRAM-SHA-512", "alice", "secret-512")
    assert _alter(broker, deletions=[_deletion("alice", 1)]) == {"alice": (0, None)}
    assert not _login(broker, "SCRAM-SHA-256", "alice", "secret-256")
    assert _login(broker, "SCRAM-SHA-512", "alice", "secret-512")
    store.close()
    store = _store(tmp_path)
    assert set(store.scram_credentials()) == {(2, "alice"), (2, "bob")}
    store.close()


def test_alter_errors_like_kafka(tmp_path: Path) -> None:
    store = _store(tmp_path)
    broker = _broker(store)
    assert _alter(broker, upsertions=[_upsert("carol")]) == {"carol": (0, None)}
    got = _alter(broker, deletions=[
        _deletion(""), _deletion("ghost"), _deletion("carol", 3), _deletion("carol", 2),
    ], upsertions=[
        _upsert("few", iterations=4095), _upsert("many", iterations=16385), _upsert("mech", mechanism=0),
        _upsert("twice"), _upsert("twice", mechanism=2), _upsert("ok", iterations=16384),
    ])
    assert got == {
        "": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
        "ghost": (ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"),
        # the first problem of a user is its answer; later alterations of that user are not looked at
        "carol": (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        "few": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
        "many": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
        "mech": (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        "twice": (ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request"),
        "ok": (0, None),
    }
    # a deletion and an upsertion of one user: both refused, nothing written
    end = store.log.log_end_offset
    assert _alter(broker, deletions=[_deletion("carol")], upsertions=[_upsert("carol", "new")]) == {
        "carol": (ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")}
    assert store.log.log_end_offset == end
    assert _login(broker, "SCRAM-SHA-256", "carol", "pw")
    # successful results first (deletions, upsertions), errors last
    request = AlterRequest(deletions=[_deletion("nobody")], upsertions=[_upsert("zed")])
    results, records = alter_records(broker, request)
    assert [r.user for r in results] == ["zed", "nobody"] and [n for n, _ in records] == ["UserScramCredentialRecord"]
    store.close()


def test_config_key_is_a_layer_below_the_metadata_log(tmp_path: Path) -> None:
    store = _store(tmp_path)
    broker = _broker(store, "SCRAM-SHA-256=[name=dora,password=from-config];"
                            "SCRAM-SHA-512=[name=dora,password=from-config,iterations=8192]")
    assert _login(broker, "SCRAM-SHA-256", "dora", "from-config")
    assert _describe(broker, ["dora"]) == {"dora": (0, [(1, 4096), (2, 8192)])}
    # a config-only credential is not in the metadata log: Kafka's RESOURCE_NOT_FOUND, with a hint
    code, message = _alter(broker, deletions=[_deletion("dora")])["dora"]
    assert code == ErrorCode.RESOURCE_NOT_FOUND and "odradek.sasl.scram.credentials" in message
    # an upsertion wins over the config key ...
    assert _alter(broker, upsertions=[_upsert("dora", "from-api", iterations=5000)]) == {"dora": (0, None)}
    assert _login(broker, "SCRAM-SHA-256", "dora", "from-api")
    assert not _login(broker, "SCRAM-SHA-256", "dora", "from-config")
    assert _describe(broker, ["dora"]) == {"dora": (0, [(1, 5000), (2, 8192)])}
    # ... and deleting it brings the config's credential back
    assert _alter(broker, deletions=[_deletion("dora")]) == {"dora": (0, None)}
    assert _login(broker, "SCRAM-SHA-256", "dora", "from-config")
    store.close()


def test_alter_without_metadata_store_is_refused() -> None:
    broker = _broker(None)
    assert _alter(broker, upsertions=[_upsert("x")]) == {"x": (ErrorCode.UNKNOWN_SERVER_ERROR, None)}


def test_acl_checks(tmp_path: Path) -> None:
    from odradek.security.acl import CLUSTER_NAME, OP_DESCRIBE, PERM_ALLOW, PT_LITERAL, RT_CLUSTER, AclBinding

    store = _store(tmp_path)
    broker = _broker(store)
    broker.config = BrokerConfig({"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                                  "super.users": "User:admin"})
    broker.authorizer = None

    def ctx(principal: str):
        session = Session("SASL_PLAINTEXT", "SASL_PLAINTEXT", principal=principal, peer="127.0.0.1:5")
        return SimpleNamespace(broker=broker, principal=principal, session=session, peer=session.peer)

    alter = AlterRequest(deletions=[_deletion("b")], upsertions=[_upsert("a"), _upsert("b")])
    header = SimpleNamespace(api_key=51, api_name="AlterUserScramCredentials")
    assert enforce(ctx("User:admin"), header, alter) is None
    with pytest.raises(Denied) as denied:
        enforce(ctx("User:alice"), header, alter)
    assert [(r.user, r.error_code) for r in denied.value.body.results] == [
        ("a", ErrorCode.CLUSTER_AUTHORIZATION_FAILED), ("b", ErrorCode.CLUSTER_AUTHORIZATION_FAILED)]

    describe_request = DescribeRequest(users=[DescribeRequest.UserName(name="a")])
    header = SimpleNamespace(api_key=50, api_name="DescribeUserScramCredentials")
    with pytest.raises(Denied) as denied:
        enforce(ctx("User:alice"), header, describe_request)
    body = denied.value.body
    assert body.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED and len(body.results) == 1
    broker.authorizer.create([AclBinding(RT_CLUSTER, CLUSTER_NAME, PT_LITERAL, "User:alice", "*", OP_DESCRIBE,
                                         PERM_ALLOW)])
    assert enforce(ctx("User:alice"), header, describe_request) is None
    store.close()
