// RFC 4180 CSV cursor and the labelled-data loader.
#include "hedge/route/csv.hpp"

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "hedge/os/csv_files.hpp"
#include "hedge/route/training.hpp"
#include "support/alloc_counter.hpp"

namespace {

using namespace hedge::route;

std::vector<std::string> fields(std::string_view text) {
  csv_cursor c{text};
  std::vector<std::string> out;
  while (!c.done()) {
    auto f = c.next();
    EXPECT_TRUE(f.ok());
    if (!f) break;
    std::string s;
    csv_unescape(*f, [&](char ch) { s.push_back(ch); });
    out.push_back(s + (f->ends_record ? "|" : ""));
  }
  return out;
}

TEST(Csv, QuotedFieldsWithCommasQuotesAndNewlines) {
  EXPECT_EQ(fields("a,\"b,c\"\n\"say \"\"hi\"\"\nthere\",2\r\n"),
            (std::vector<std::string>{"a", "b,c|", "say \"hi\"\nthere", "2|"}));
  EXPECT_EQ(fields("x,"), (std::vector<std::string>{"x", "|"}));
  EXPECT_EQ(fields(""), std::vector<std::string>{});
}

TEST(Csv, MalformedInputIsAnError) {
  csv_cursor open{"\"never closed"};
  EXPECT_EQ(open.next().error().code(), hedge::errc::parse_error);
  csv_cursor junk{"\"a\"b,c"};
  EXPECT_EQ(junk.next().error().code(), hedge::errc::parse_error);
  csv_cursor stray{"a\"b"};
  EXPECT_EQ(stray.next().error().code(), hedge::errc::parse_error);
}

TEST(LabelledCsv, ParsesRouteLlmLayout) {
  auto rows = parse_labelled_csv("prompt,weak,strong\n\"Q1, with comma\nA. x\",True,False\nQ2,0,1\n");
  ASSERT_TRUE(rows.ok()) << rows.error().c_str();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[0].prompt, "Q1, with comma\nA. x");
  EXPECT_EQ((*rows)[0].weak, 1.0f);
  EXPECT_EQ((*rows)[1].strong, 1.0f);
  EXPECT_EQ(parse_labelled_csv("p,w,s\nq,maybe,True\n").error().code(), hedge::errc::parse_error);
  EXPECT_EQ(parse_labelled_csv("p,w,s\nq,True\n").error().code(), hedge::errc::parse_error);
  EXPECT_FALSE(parse_labelled_csv("").ok());
}

TEST(PromptLog, TakesTheFirstColumnOfEveryRecord) {
  auto prompts = parse_prompt_log("prompt,ts\n\"multi\nline, \"\"quoted\"\"\",2026-01-01\n\nplain\nlast,1,2,3");
  ASSERT_TRUE(prompts.ok()) << prompts.error().c_str();
  EXPECT_EQ(*prompts, (std::vector<std::string>{"multi\nline, \"quoted\"", "plain", "last"}));
  // A labelled file is a valid log too: the outcome columns are ignored.
  auto labelled = parse_prompt_log("prompt,weak,strong\nQ1,True,False\n");
  ASSERT_TRUE(labelled.ok());
  EXPECT_EQ(*labelled, std::vector<std::string>{"Q1"});
  EXPECT_EQ(parse_prompt_log("").error().code(), hedge::errc::parse_error);
  EXPECT_EQ(parse_prompt_log("prompt\n\"never closed").error().code(), hedge::errc::parse_error);
  auto header_only = parse_prompt_log("prompt\n");
  ASSERT_TRUE(header_only.ok());
  EXPECT_TRUE(header_only->empty());
}

// A data set's files: the .csv files of the directory only (not a directory named like one,
// not another extension), sorted; a directory that cannot
// be listed is an error that names it.
TEST(CsvFiles, ListsTheCsvFilesOfADirectorySorted) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("hedge_csv_files_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
  fs::remove_all(dir);
  fs::create_directories(dir / "nested.csv");
  for (const char* name : {"b.csv", "a.csv", "notes.txt", "c.CSV"}) std::ofstream(dir / name) << "prompt,weak,strong\n";
  const auto files = hedge::os::csv_files_in(dir.string());
  ASSERT_TRUE(files.ok()) << files.error().c_str();
  const std::vector<std::string> expected{(dir / "a.csv").string(), (dir / "b.csv").string()};
  EXPECT_EQ(*files, expected);
  fs::remove_all(dir);

  const auto missing = hedge::os::csv_files_in(dir.string());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code(), hedge::errc::io_error);
  EXPECT_NE(std::string(missing.error().c_str()).find(dir.string()), std::string::npos);
}

namespace fs = std::filesystem;

fs::path scratch_dir(const char* name) {
  const fs::path dir = fs::temp_directory_path() /
                       (std::string(name) + std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

bool contains(const hedge::error& e, const std::string& text) { return std::string(e.c_str()).find(text) != std::string::npos; }

// Errors name the file and the OS's reason, for reading and for writing; a full device
// fails at the flush or close, after every fwrite has succeeded into the buffer.
TEST(TextFiles, ErrorsNameTheFileAndTheReason) {
  const fs::path dir = scratch_dir("hedge_text_files_");
  const std::string missing = (dir / "missing.csv").string();
  const auto read_missing = hedge::os::read_text_file(missing);
  ASSERT_FALSE(read_missing.ok());
  EXPECT_EQ(read_missing.error().code(), hedge::errc::io_error);
  EXPECT_TRUE(contains(read_missing.error(), "cannot open " + missing + ": " + std::strerror(ENOENT)))
      << read_missing.error().c_str();
  const auto read_dir = hedge::os::load_labelled_csv(dir.string());
  ASSERT_FALSE(read_dir.ok());
  EXPECT_TRUE(contains(read_dir.error(), dir.string() + ": " + std::strerror(EISDIR))) << read_dir.error().c_str();

  const std::string no_dir = (dir / "absent" / "out.txt").string();
  const auto write_missing_dir = hedge::os::write_text_file(no_dir, "x");
  ASSERT_FALSE(write_missing_dir.ok());
  EXPECT_TRUE(contains(write_missing_dir.error(), "cannot write " + no_dir + ": " + std::strerror(ENOENT)))
      << write_missing_dir.error().c_str();
  const auto write_full = hedge::os::write_text_file("/dev/full", "a line\n");
  ASSERT_FALSE(write_full.ok());
  EXPECT_TRUE(contains(write_full.error(), std::string("cannot write /dev/full: ") + std::strerror(ENOSPC)))
      << write_full.error().c_str();
  fs::remove_all(dir);
}

// A file is read into a string reserved at its size: one allocation, so a 50 MB log is
// never held twice while a growing string copies itself.
TEST(TextFiles, ReadsALargeFileWithOneAllocation) {
  const fs::path dir = scratch_dir("hedge_text_large_");
  const std::string path = (dir / "large.csv").string();
  std::string content;
  for (int k = 0; content.size() < (4u << 20); ++k) content += "prompt number " + std::to_string(k) + ",1,0\n";
  ASSERT_TRUE(hedge::os::write_text_file(path, content).ok());
  hedge::test::alloc_scope scope;
  const auto text = hedge::os::read_text_file(path);
  const std::size_t allocations = scope.count();
  ASSERT_TRUE(text.ok()) << text.error().c_str();
  EXPECT_EQ(allocations, 1u);
  EXPECT_TRUE(*text == content);
  fs::remove_all(dir);
}

// Files whose size reads as 0 (a /proc file, a pipe) are read to their end all the same.
TEST(TextFiles, ReadsFilesWithoutASize) {
  const auto status = hedge::os::read_text_file("/proc/self/status");
  ASSERT_TRUE(status.ok()) << status.error().c_str();
  EXPECT_EQ(status->rfind("Name:", 0), 0u) << *status;

  const fs::path dir = scratch_dir("hedge_text_fifo_");
  const std::string fifo = (dir / "log.csv").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  const std::string content(200000, 'q');
  std::thread writer([&] { std::ofstream(fifo, std::ios::binary) << content; });
  const auto text = hedge::os::read_text_file(fifo);
  writer.join();
  ASSERT_TRUE(text.ok()) << text.error().c_str();
  EXPECT_EQ(text->size(), content.size());
  fs::remove_all(dir);
}

}  // namespace
