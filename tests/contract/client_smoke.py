"""A client generated from the router's OpenAPI document (openapi-python-client)
drives a real cluster: sign in, key-value, SQL, documents, time series.

Run by tests/contract/run.sh after the client is generated:
    python client_smoke.py URL USERNAME PASSWORD
"""

import sys
import uuid

from tessera_client import AuthenticatedClient, Client
from tessera_client.api.default import (
    get_documents_collections_name_documents_id,
    get_kv_keys_key,
    post_auth_login,
    post_documents_collections_name_documents,
    post_kv_keys,
    post_query,
    post_timeseries_query,
    post_timeseries_write,
)
from tessera_client.models import (
    InsertBody,
    InsertBodyDocument,
    KvPutRequest,
    LoginRequest,
    QueryRequest,
    QueryRequest2,
    TsPointIn,
    WriteRequest,
)


def check(what, response, status):
    assert response.status_code == status, f"{what}: {response.status_code} {response.content[:300]!r}"
    assert response.parsed is not None, f"{what}: the answer did not parse as the document says: {response.content[:300]!r}"
    print(f"ok  {what}")
    return response.parsed


def main(url, username, password):
    anonymous = Client(base_url=url, raise_on_unexpected_status=True)
    login = check("sign in", post_auth_login.sync_detailed(client=anonymous, body=LoginRequest(username=username, password=password)), 200)
    client = AuthenticatedClient(base_url=url, token=login.token, raise_on_unexpected_status=True)
    run = uuid.uuid4().hex[:8]

    key = f"smoke/{run}"
    check("put a key", post_kv_keys.sync_detailed(client=client, body=KvPutRequest(key=key, value={"n": 1, "run": run})), 200)
    entry = check("get it back", get_kv_keys_key.sync_detailed(key, client=client), 200)
    assert entry.key == key and entry.value == {"n": 1, "run": run}, entry

    table = f"smoke_{run}"
    check("create a table", post_query.sync_detailed(client=client, body=QueryRequest(sql=f"CREATE TABLE {table} (id INT PRIMARY KEY, name TEXT)")), 200)
    check("insert a row", post_query.sync_detailed(client=client, body=QueryRequest(sql=f"INSERT INTO {table} VALUES ($1, $2)", params=[1, "ada"])), 200)
    rows = check("select it", post_query.sync_detailed(client=client, body=QueryRequest(sql=f"SELECT name FROM {table} WHERE id = 1")), 200)
    assert rows.data.to_dict()["rows"] == [["ada"]], rows.to_dict()

    collection = f"smoke-{run}"
    document = InsertBodyDocument.from_dict({"name": "ada", "langs": ["en", "fr"]})
    made = check("insert a document", post_documents_collections_name_documents.sync_detailed(collection, client=client, body=InsertBody(document=document, id="d1")), 201)
    got = check("read it", get_documents_collections_name_documents_id.sync_detailed(collection, "d1", client=client), 200)
    assert got.to_dict()["data"] == {"name": "ada", "langs": ["en", "fr"]}, (made.to_dict(), got.to_dict())

    metric = f"smoke.{run}"
    points = [TsPointIn(timestamp=1_700_000_000_000 + i * 1000, value=float(i)) for i in range(5)]
    check("write points", post_timeseries_write.sync_detailed(client=client, body=WriteRequest(metric=metric, points=points)), 200)
    answer = check("query them", post_timeseries_query.sync_detailed(client=client, body=QueryRequest2(metric=metric, aggregation="sum")), 200)
    series = answer.to_dict()["series"]
    assert [p["value"] for p in series[0]["points"]] == [10.0], series
    print("the generated client works against the cluster")


if __name__ == "__main__":
    main(*sys.argv[1:4])
