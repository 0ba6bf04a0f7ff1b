// price_change [--postgres CONNINFO] [--relay PATH] HOST:PORT — the price-change story
// (price_change.cc) against a conduit server; without --postgres, on a PostgreSQL of its own
// (initdb + pg_ctl in a temporary directory, unix socket only).

#include <filesystem>
#include <iostream>
#include <memory>
#include <string>

#include "common/testing/temp_dir.h"
#include "examples/price_change/story.h"
#include "tests/support/postgres_process.h"

int main(int argc, char** argv) {
  std::string address, conninfo;
  std::string relay = (std::filesystem::path(argv[0]).parent_path() / "conduit-outbox-relay");
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--postgres" && i + 1 < argc) {
      conninfo = argv[++i];
    } else if (arg == "--relay" && i + 1 < argc) {
      relay = argv[++i];
    } else {
      address = arg;
    }
  }
  if (address.empty()) {
    std::cerr << "usage: " << argv[0] << " [--postgres CONNINFO] [--relay PATH] HOST:PORT\n";
    return 2;
  }
  std::unique_ptr<conduit::testing::TempDir> dir;
  std::unique_ptr<conduit::testing::PostgresProcess> pg;
  if (conninfo.empty()) {
    dir = std::make_unique<conduit::testing::TempDir>();
    pg = std::make_unique<conduit::testing::PostgresProcess>(dir->path());
    if (!pg->running()) {
      std::cerr << "could not start PostgreSQL from " << conduit::testing::PostgresProcess::BinDir()
                << " (Debian: apt-get install postgresql); or pass --postgres "
                   "CONNINFO\n";
      return 1;
    }
    conninfo = pg->conninfo("price-change");
    std::cout << "PostgreSQL of its own in " << dir->path() << std::endl;
  }
  conduit::examples::Story story(address, conninfo, relay);
  return story.Run();
}
