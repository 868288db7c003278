#!/usr/bin/env bash
# install-duckdb.sh installs DuckDB for Node (@duckdb/node-api and the
# Linux x64 bindings, which carry DuckDB's own library) into
# <repo>/.assets/duckdb/. The store's interoperability test
# (store/duckdb_test.go) uses it as the other side of the trajectories
# parquet format: ART reads its trajectories with DuckDB, so DuckDB must read
# ours, and we must read the files DuckDB (and so pyarrow-like writers, with
# nullable columns and lists) writes. The test is skipped when the folder is
# absent and fails under ART_REQUIRE_ASSETS=1.
#
# Usage: scripts/install-duckdb.sh
#
# The bindings are named explicitly: npm takes them as an optional
# dependency, which the shared installer omits. Idempotent, and never
# leaves a half-installed folder (scripts/lib/npm-assets.sh).
set -euo pipefail
NAME=install-duckdb
source "$(dirname "${BASH_SOURCE[0]}")/lib/npm-assets.sh"

verify_npm_install() {
	(cd "$1" && timeout 60 node --input-type=module -e '
import { DuckDBInstance } from "@duckdb/node-api";
const db = await DuckDBInstance.create(":memory:");
const r = await (await db.connect()).runAndReadAll("SELECT 40 + 2 AS x");
if (r.getRowObjectsJson()[0].x !== 42) throw new Error("duckdb: 40 + 2 is not 42");
')
}

install_npm_assets "$ASSETS/duckdb" \
	"@duckdb/node-api@1.5.6-r.1" \
	"@duckdb/node-bindings-linux-x64@1.5.6-r.1"
