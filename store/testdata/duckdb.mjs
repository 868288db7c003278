// duckdb.mjs runs SQL statements (one an argument) in an in-memory DuckDB
// and prints the rows of the last one as JSON (DuckDB's JSON form: BIGINT
// as a string, lists and structs as JSON). store/duckdb_test.go drives it.
// Environment: ART_DUCKDB, the folder scripts/install-duckdb.sh fills.
import { createRequire } from "node:module";
import path from "node:path";

const require = createRequire(path.join(process.env.ART_DUCKDB, "package.json"));
const { DuckDBInstance } = require("@duckdb/node-api");

const db = await DuckDBInstance.create(":memory:");
const conn = await db.connect();
let rows = [];
for (const sql of process.argv.slice(2)) {
	rows = (await conn.runAndReadAll(sql)).getRowObjectsJson();
}
process.stdout.write(JSON.stringify(rows));
