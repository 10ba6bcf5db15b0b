#include "tenax/store/catalog.h"

#include <chrono>
#include <set>
#include <sstream>

#include "tenax/store/stripe_layout.h"

namespace tenax::store {
namespace {

// Every table drives decisions (which node holds which chunk, which nodes
// live, what a dataset is): each row carries a checksum of its values
// (core/sqlite_db.h, RowChecksumColumn), verified when the catalog opens.
constexpr ChecksummedTable kNodeTable{"store_node", "id, name, location, zone, state", "'node ' || name"};
constexpr ChecksummedTable kDatasetTable{"store_dataset",
                                         "name, records, record_bytes, chunk_bytes, k, m, class_totals, sample_shape",
                                         "'dataset ' || name"};
constexpr ChecksummedTable kChunkTable{
    "store_chunk",
    "dataset, stripe, idx, node, first_record, record_count, payload_bytes, crc32c, class_counts, deferred",
    "'dataset ' || dataset || ', stripe ' || stripe || ', chunk ' || idx"};
constexpr ChecksummedTable kRecoveryTable{"store_recovery", "dataset, owner, started_unix",
                                          "'the recovery of ' || dataset"};

std::string Schema() {
  return R"sql(
CREATE TABLE IF NOT EXISTS store_node (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  location TEXT NOT NULL UNIQUE,
  zone TEXT NOT NULL,
  state TEXT NOT NULL,
  )sql" + RowChecksumColumn(kNodeTable) + R"sql(
);
CREATE TABLE IF NOT EXISTS store_dataset (
  name TEXT PRIMARY KEY,
  records INTEGER NOT NULL,
  record_bytes INTEGER NOT NULL,
  chunk_bytes INTEGER NOT NULL,
  k INTEGER NOT NULL,
  m INTEGER NOT NULL,
  class_totals TEXT NOT NULL,
  sample_shape TEXT NOT NULL,
  )sql" + RowChecksumColumn(kDatasetTable) + R"sql(
);
CREATE TABLE IF NOT EXISTS store_chunk (
  dataset TEXT NOT NULL REFERENCES store_dataset(name),
  stripe INTEGER NOT NULL,
  idx INTEGER NOT NULL,
  node INTEGER NOT NULL,
  first_record INTEGER NOT NULL,
  record_count INTEGER NOT NULL,
  payload_bytes INTEGER NOT NULL,
  crc32c INTEGER NOT NULL,
  class_counts TEXT NOT NULL,
  deferred INTEGER NOT NULL DEFAULT 0,
  )sql" + RowChecksumColumn(kChunkTable) + R"sql(,
  PRIMARY KEY (dataset, stripe, idx)
);
CREATE TABLE IF NOT EXISTS store_recovery (
  dataset TEXT PRIMARY KEY,
  owner TEXT NOT NULL,
  started_unix INTEGER NOT NULL,
  )sql" + RowChecksumColumn(kRecoveryTable) + R"sql(
);
)sql";
}

std::string JoinCounts(const std::vector<uint64_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s;
}

// "1,2,3" -> {1,2,3}; "" -> {}. False for anything else.
bool SplitCounts(const std::string& s, std::vector<uint64_t>& out) {
  out.clear();
  if (s.empty()) return true;
  std::istringstream in(s);
  std::string part;
  while (std::getline(in, part, ',')) {
    if (part.empty() || part.size() > 19 || part.find_first_not_of("0123456789") != std::string::npos) return false;
    out.push_back(std::stoull(part));
  }
  return s.back() != ',';
}

}  // namespace

const char* ToString(NodeState s) { return s == NodeState::kLive ? "live" : "failed"; }

Result<std::unique_ptr<StoreCatalog>> StoreCatalog::Open(const std::string& path) {
  TENAX_ASSIGN_OR_RETURN(SqliteDb db, SqliteDb::Open(path, "store catalog"));
  TENAX_ASSIGN_OR_RETURN(int64_t app_id, db.ApplicationId());
  if (app_id != 0 && app_id != kTenaxApplicationId) {
    return FailedPrecondition("store catalog " + path + " belongs to another program (SQLite application id " +
                              std::to_string(app_id) + "); use another --catalog file");
  }
  if (app_id == 0) {
    TENAX_ASSIGN_OR_RETURN(std::set<std::string> tables, db.Tables());
    if (!tables.empty()) {
      return FailedPrecondition("store catalog " + path +
                                " is not a tenax file (it holds tables but no tenax stamp); use another --catalog file");
    }
  }
  TENAX_RETURN_IF_ERROR(db.Exec("BEGIN IMMEDIATE;" + Schema() + "PRAGMA application_id = " +
                                std::to_string(kTenaxApplicationId) + "; COMMIT;"));
  for (const ChecksummedTable& t : {kNodeTable, kDatasetTable, kChunkTable, kRecoveryTable}) {
    TENAX_RETURN_IF_ERROR(db.VerifyRowChecksums(t));
  }
  return std::unique_ptr<StoreCatalog>(new StoreCatalog(std::move(db)));
}

Status StoreCatalog::Damaged(const std::string& what) const {
  return DataLoss("store catalog " + path() + ": " + what + ", which tenax never writes (damaged catalog?)");
}

Result<std::vector<StoreNode>> StoreCatalog::Nodes() {
  SqliteStatement q(db_.get(), "SELECT id, name, location, zone, state FROM store_node ORDER BY id");
  if (!q.ok()) return db_.Error("read data nodes");
  std::vector<StoreNode> out;
  int rc;
  while (SqliteStatement::IsRow(rc = q.Step())) {
    const std::string state = q.Text(4);
    if (q.Int(0) != static_cast<int64_t>(out.size()) || (state != "live" && state != "failed")) {
      return Damaged("data node row " + std::to_string(q.Int(0)) + " with state '" + state + "'");
    }
    out.push_back({static_cast<int>(q.Int(0)), q.Text(1), q.Text(2), q.Text(3),
                   state == "live" ? NodeState::kLive : NodeState::kFailed});
  }
  if (!SqliteStatement::IsDone(rc)) return db_.Error("read data nodes");
  return out;
}

Status StoreCatalog::AddNodes(const std::vector<StoreNode>& nodes) {
  TENAX_ASSIGN_OR_RETURN(auto existing, Nodes());
  if (!existing.empty()) {
    return FailedPrecondition("store catalog " + path() + " already has " + std::to_string(existing.size()) +
                              " data nodes");
  }
  std::set<std::string> names, locations;
  for (const StoreNode& n : nodes) {
    if (n.name.empty() || n.location.empty()) return InvalidArgument("a data node needs a name and a location");
    if (!names.insert(n.name).second) return InvalidArgument("data node name '" + n.name + "' is given twice");
    if (!locations.insert(n.location).second) {
      return InvalidArgument("data node location '" + n.location + "' is given twice");
    }
  }
  return db_.WriteTransaction([&]() -> Status {
    for (size_t i = 0; i < nodes.size(); ++i) {
      SqliteStatement u(db_.get(), "INSERT INTO store_node (id, name, location, zone, state) VALUES (?, ?, ?, ?, ?)");
      u.Bind(1, static_cast<int64_t>(i));
      u.Bind(2, nodes[i].name);
      u.Bind(3, nodes[i].location);
      u.Bind(4, nodes[i].zone);
      u.Bind(5, std::string(ToString(nodes[i].state)));
      if (!SqliteStatement::IsDone(u.Step())) return db_.Error("add data node " + nodes[i].name);
    }
    return Status::Ok();
  });
}

Status StoreCatalog::SetNodeState(int id, NodeState state) {
  SqliteStatement u(db_.get(), "UPDATE store_node SET state = ? WHERE id = ?");
  u.Bind(1, std::string(ToString(state)));
  u.Bind(2, static_cast<int64_t>(id));
  if (!SqliteStatement::IsDone(u.Step())) return db_.Error("set the state of data node " + std::to_string(id));
  if (db_.Changes() == 0) return NotFound("store catalog " + path() + " has no data node " + std::to_string(id));
  return Status::Ok();
}

Status StoreCatalog::PutManifest(const DatasetManifest& m) {
  TENAX_RETURN_IF_ERROR(CheckDatasetName(m.dataset));
  TENAX_ASSIGN_OR_RETURN(auto nodes, Nodes());
  for (size_t s = 0; s < m.stripes.size(); ++s) {
    for (const StoredChunk& c : m.stripes[s]) {
      if (c.node < 0 || static_cast<size_t>(c.node) >= nodes.size()) {
        return InvalidArgument(m.dataset + " stripe " + std::to_string(s) + " chunk " + std::to_string(c.index) +
                               " is on data node " + std::to_string(c.node) + ", which the catalog does not have");
      }
    }
  }
  return db_.WriteTransaction([&]() -> Status {
    auto fail = [&](const std::string& what) { return db_.Error(what + " of " + m.dataset); };
    {
      SqliteStatement del(db_.get(), "DELETE FROM store_chunk WHERE dataset = ?");
      del.Bind(1, m.dataset);
      if (!SqliteStatement::IsDone(del.Step())) return fail("replace the chunks");
    }
    {
      SqliteStatement u(db_.get(),
                        "INSERT OR REPLACE INTO store_dataset (name, records, record_bytes, chunk_bytes, k, m, "
                        "class_totals, sample_shape) VALUES (?, ?, ?, ?, ?, ?, ?, ?)");
      u.Bind(1, m.dataset);
      u.Bind(2, static_cast<int64_t>(m.layout.records));
      u.Bind(3, static_cast<int64_t>(m.layout.record_bytes));
      u.Bind(4, static_cast<int64_t>(m.layout.chunk_bytes));
      u.Bind(5, static_cast<int64_t>(m.layout.k));
      u.Bind(6, static_cast<int64_t>(m.layout.m));
      u.Bind(7, JoinCounts(m.class_totals));
      u.Bind(8, JoinCounts(m.sample_shape));
      if (!SqliteStatement::IsDone(u.Step())) return fail("write the layout");
    }
    for (size_t s = 0; s < m.stripes.size(); ++s) {
      for (const StoredChunk& c : m.stripes[s]) {
        SqliteStatement u(db_.get(),
                          "INSERT INTO store_chunk (dataset, stripe, idx, node, first_record, record_count, "
                          "payload_bytes, crc32c, class_counts, deferred) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
        u.Bind(1, m.dataset);
        u.Bind(2, static_cast<int64_t>(s));
        u.Bind(3, static_cast<int64_t>(c.index));
        u.Bind(4, static_cast<int64_t>(c.node));
        u.Bind(5, static_cast<int64_t>(c.first_record));
        u.Bind(6, static_cast<int64_t>(c.record_count));
        u.Bind(7, static_cast<int64_t>(c.payload_bytes));
        u.Bind(8, static_cast<int64_t>(c.payload_crc32c));
        u.Bind(9, JoinCounts(c.class_counts));
        u.Bind(10, int64_t{c.deferred ? 1 : 0});
        if (!SqliteStatement::IsDone(u.Step())) return fail("write the chunks");
      }
    }
    return Status::Ok();
  });
}

Result<std::vector<std::string>> StoreCatalog::Datasets() {
  SqliteStatement q(db_.get(), "SELECT name FROM store_dataset ORDER BY name");
  if (!q.ok()) return db_.Error("list datasets");
  std::vector<std::string> out;
  int rc;
  while (SqliteStatement::IsRow(rc = q.Step())) out.push_back(q.Text(0));
  if (!SqliteStatement::IsDone(rc)) return db_.Error("list datasets");
  return out;
}

Result<DatasetManifest> StoreCatalog::Manifest(const std::string& dataset) {
  DatasetManifest m;
  m.dataset = dataset;
  {
    SqliteStatement q(db_.get(),
                      "SELECT records, record_bytes, chunk_bytes, k, m, class_totals, sample_shape FROM store_dataset "
                      "WHERE name = ?");
    q.Bind(1, dataset);
    const int rc = q.Step();
    if (SqliteStatement::IsDone(rc)) {
      TENAX_ASSIGN_OR_RETURN(auto names, Datasets());
      std::string list;
      for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
      return NotFound("store catalog " + path() + " has no dataset '" + dataset + "' (it has: " +
                      (list.empty() ? "none" : list) + ")");
    }
    if (!SqliteStatement::IsRow(rc)) return db_.Error("read dataset " + dataset);
    for (int i = 0; i < 5; ++i) {
      if (q.Int(i) < 0) return Damaged("dataset " + dataset + " has a negative layout value");
    }
    m.layout = {static_cast<uint64_t>(q.Int(0)), static_cast<uint64_t>(q.Int(1)), static_cast<uint64_t>(q.Int(2)),
                static_cast<int>(q.Int(3)), static_cast<int>(q.Int(4))};
    if (!SplitCounts(q.Text(5), m.class_totals) || m.class_totals.empty()) {
      return Damaged("dataset " + dataset + " has class totals '" + q.Text(5) + "'");
    }
    m.classes = static_cast<int>(m.class_totals.size());
    uint64_t sample_bytes = 1;
    const bool shape_ok = SplitCounts(q.Text(6), m.sample_shape) && m.sample_shape.size() <= 8;
    for (uint64_t d : m.sample_shape) sample_bytes = d == 0 || sample_bytes > (uint64_t{1} << 40) ? 0 : sample_bytes * d;
    if (!shape_ok || (!m.sample_shape.empty() && sample_bytes + 1 != m.layout.record_bytes)) {
      return Damaged("dataset " + dataset + " has the sample shape '" + q.Text(6) + "' for records of " +
                     std::to_string(m.layout.record_bytes) + " bytes");
    }
  }
  auto layout = StripeLayout::Create(m.layout);
  if (!layout.ok()) return Damaged("dataset " + dataset + " has the layout: " + layout.status().message());
  TENAX_ASSIGN_OR_RETURN(auto nodes, Nodes());
  const size_t per_stripe = static_cast<size_t>(m.layout.k + m.layout.m);
  m.stripes.assign(layout->stripes(), std::vector<StoredChunk>(per_stripe));
  std::vector<std::vector<bool>> seen(layout->stripes(), std::vector<bool>(per_stripe, false));
  SqliteStatement q(db_.get(),
                    "SELECT stripe, idx, node, first_record, record_count, payload_bytes, crc32c, class_counts, deferred "
                    "FROM store_chunk WHERE dataset = ?");
  q.Bind(1, dataset);
  int rc;
  uint64_t rows = 0;
  while (SqliteStatement::IsRow(rc = q.Step())) {
    const int64_t s = q.Int(0), i = q.Int(1);
    const std::string where = "dataset " + dataset + " stripe " + std::to_string(s) + " chunk " + std::to_string(i);
    if (s < 0 || static_cast<uint64_t>(s) >= layout->stripes() || i < 0 || static_cast<size_t>(i) >= per_stripe) {
      return Damaged(where + " outside the layout");
    }
    const ChunkRange r = layout->ChunksOf(static_cast<uint64_t>(s))[static_cast<size_t>(i)];
    StoredChunk c;
    c.index = static_cast<uint32_t>(i);
    c.node = static_cast<int>(q.Int(2));
    c.first_record = static_cast<uint64_t>(q.Int(3));
    c.record_count = static_cast<uint64_t>(q.Int(4));
    c.payload_bytes = static_cast<uint64_t>(q.Int(5));
    c.payload_crc32c = static_cast<uint32_t>(q.Int(6));
    const bool counts_ok = SplitCounts(q.Text(7), c.class_counts);
    c.deferred = q.Int(8) != 0;
    const bool parity = static_cast<int>(i) >= m.layout.k;
    if (q.Int(2) < 0 || static_cast<size_t>(q.Int(2)) >= nodes.size() || q.Int(6) < 0 || q.Int(6) > 0xffffffffLL ||
        c.first_record != r.first_record || c.record_count != r.record_count || c.payload_bytes != r.payload_bytes ||
        !counts_ok || c.class_counts.size() != (parity ? 0 : m.class_totals.size()) ||
        seen[static_cast<size_t>(s)][static_cast<size_t>(i)]) {
      return Damaged(where + " (node " + std::to_string(q.Int(2)) + ", records " + std::to_string(q.Int(3)) + "+" +
                     std::to_string(q.Int(4)) + ", class counts '" + q.Text(7) + "')");
    }
    seen[static_cast<size_t>(s)][static_cast<size_t>(i)] = true;
    m.stripes[static_cast<size_t>(s)][static_cast<size_t>(i)] = std::move(c);
    ++rows;
  }
  if (!SqliteStatement::IsDone(rc)) return db_.Error("read the chunks of " + dataset);
  if (rows != layout->stripes() * per_stripe) {
    return Damaged("dataset " + dataset + " has " + std::to_string(rows) + " chunk rows of the " +
                   std::to_string(layout->stripes() * per_stripe) + " its layout needs");
  }
  return m;
}

Result<std::string> StoreCatalog::ClaimRecovery(const std::string& dataset, const std::string& owner,
                                                int64_t stale_seconds) {
  const int64_t now =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  // IMMEDIATE: the write lock first, so that two claimants serialise.
  return db_.WriteTransaction([&]() -> Result<std::string> {
    auto fail = [&](const std::string& what) { return db_.Error(what); };
    {
      SqliteStatement drop(db_.get(), "DELETE FROM store_recovery WHERE dataset = ? AND started_unix < ?");
      if (!drop.ok()) return fail("claim the recovery of " + dataset);
      drop.Bind(1, dataset);
      drop.Bind(2, now - stale_seconds);
      if (!SqliteStatement::IsDone(drop.Step())) return fail("claim the recovery of " + dataset);
    }
    {
      SqliteStatement add(db_.get(), "INSERT OR IGNORE INTO store_recovery (dataset, owner, started_unix) VALUES (?, ?, ?)");
      if (!add.ok()) return fail("claim the recovery of " + dataset);
      add.Bind(1, dataset);
      add.Bind(2, owner);
      add.Bind(3, now);
      if (!SqliteStatement::IsDone(add.Step())) return fail("claim the recovery of " + dataset);
    }
    std::string holder;
    {
      SqliteStatement q(db_.get(), "SELECT owner FROM store_recovery WHERE dataset = ?");
      if (!q.ok()) return fail("claim the recovery of " + dataset);
      q.Bind(1, dataset);
      if (!SqliteStatement::IsRow(q.Step())) return fail("claim the recovery of " + dataset);
      holder = q.Text(0);
    }
    return holder;
  });
}

Status StoreCatalog::ReleaseRecovery(const std::string& dataset, const std::string& owner) {
  SqliteStatement q(db_.get(), "DELETE FROM store_recovery WHERE dataset = ? AND owner = ?");
  if (!q.ok()) return db_.Error("release the recovery of " + dataset);
  q.Bind(1, dataset);
  q.Bind(2, owner);
  if (!SqliteStatement::IsDone(q.Step())) return db_.Error("release the recovery of " + dataset);
  return Status::Ok();
}

}  // namespace tenax::store
