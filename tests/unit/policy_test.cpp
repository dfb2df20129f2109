// The policy engine: validation errors with JSON paths, decisions with the rule that made them,
// the precompiled per-communicator tables, membership and communicator creation.

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "core/collective_kind.hpp"
#include "policy/policy.hpp"
#include "sempi/error.hpp"
#include "support/temp_dir.hpp"

namespace sempi::policy {
namespace {

using detail::OpKind;

Policy compile(const std::string& text) { return Policy::compile(PolicyDocument::parse(text, "test")); }

constexpr auto kP2p = static_cast<std::uint16_t>(OpKind::p2p);
constexpr auto kAllreduce = static_cast<std::uint16_t>(OpKind::allreduce);
constexpr auto kBarrier = static_cast<std::uint16_t>(OpKind::barrier);

const char* kIo = R"({"version": 1,
  "groups": {"all": "*", "io": [0, "1"], "left": "0-3", "right": ["4-5", 6, 7]},
  "segmentation": [{"between": ["left", "left"]}, {"between": ["right", "right"]},
                   {"between": ["io", "all"], "communicators": ["io*"]}],
  "communicators": [
    {"name": "world", "members": "*", "collectives": ["barrier", "comm_create"], "p2p_tags": [1, "10-19"]},
    {"name": "io*", "members": ["left", "right"], "collectives": [], "p2p_tags": "*", "max_message_bytes": 1000},
    {"name": "world.split", "members": ["left", "right"], "collectives": "*", "p2p_tags": "*"}],
  "limits": {"max_message_bytes": 5000},
  "audit": {"messages": "digest"}})";

// Policy::validate reports an issue at `path` whose message holds `words`.
void expect_issue(const char* text, const char* path, const char* words) {
  const auto issues = Policy::validate(nlohmann::json::parse(text));
  bool found = false;
  std::string all;
  for (const auto& i : issues) {
    all += i.path + ": " + i.message + "\n";
    found = found || (i.path == path && i.message.find(words) != std::string::npos);
  }
  EXPECT_TRUE(found) << text << "\ngot:\n" << all;
}

// PolicyDocument::load(path) throws sempi::Error(config) whose message holds `words`.
std::string load_refused(const std::filesystem::path& path, const std::string& words) {
  try {
    (void)PolicyDocument::load(path);
    ADD_FAILURE() << "accepted " << path;
    return {};
  } catch (const Error& e) {
    EXPECT_EQ(e.error_class(), ErrorClass::config);
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    return e.what();
  }
}

TEST(PolicyValidation, DefaultPolicyIsValidAndAllowsEverything) {
  const auto p = Policy::compile(PolicyDocument::default_policy());
  EXPECT_TRUE(p.enforcing());
  EXPECT_EQ(p.message_audit(), MessageAudit::off);
  EXPECT_TRUE(p.ever_talk(0, 4095));
  const auto d = p.decide({3, 9, "anything.dup", kAllreduce, 0, 1ull << 40});
  EXPECT_TRUE(d.allowed) << d.explanation;
  EXPECT_TRUE(p.check_members("x", {0, 5, 9}).allowed);
}

// The file the docs name as the default is the default: same canonical text, same digest (the
// digest a job without --policy records and binds into its certificates).
TEST(PolicyValidation, AllowAllExampleIsTheDefault) {
  const auto file = PolicyDocument::load(SEMPI_CONFIG_DIR "/examples/allow-all.json");
  const auto builtin = PolicyDocument::default_policy();
  EXPECT_EQ(file.canonical, builtin.canonical);
  EXPECT_EQ(file.digest, builtin.digest);
}

TEST(PolicyValidation, ErrorsNameTheJsonPath) {
  struct Case {
    const char* text;
    const char* path;
    const char* words;
  };
  const Case cases[] = {
      {R"({})", "/version", "missing"},
      {R"({"version": 2})", "/version", "unsupported version 2"},
      {R"({"version": 1, "mode": "dry"})", "/mode", "not one of"},
      {R"({"version": 1, "on_violation": 3})", "/on_violation", "one of"},
      {R"({"version": 1, "extra": 1})", "/extra", "unknown key"},
      {R"({"version": 1, "groups": {"a": "5-2"}})", "/groups/a", "empty"},
      {R"({"version": 1, "groups": {"a": [1, "x"]}})", "/groups/a/1", "not a number"},
      {R"({"version": 1, "groups": {"a b": 1}})", "/groups/a b", "group name"},
      {R"({"version": 1, "groups": {"a": -1}})", "/groups/a", "outside"},
      {R"({"version": 1, "segmentation": [{"between": ["x", "*"]}]})", "/segmentation/0/between/0",
       "unknown group 'x'"},
      {R"({"version": 1, "segmentation": [{"between": ["*"]}]})", "/segmentation/0/between",
       "exactly two"},
      {R"({"version": 1, "segmentation": [{"between": ["*", "*"], "communicators": []}]})",
       "/segmentation/0/communicators", "empty list"},
      {R"({"version": 1, "communicators": [{"name": "a*b"}]})", "/communicators/0/name",
       "prefix ending"},
      {R"({"version": 1, "communicators": [{"name": "w"}, {"name": "x", "collectives": ["barrier", "allredcue"]}]})",
       "/communicators/1/collectives/1", "unknown collective 'allredcue'"},
      {R"({"version": 1, "communicators": [{"name": "w", "collectives": ["p2p"]}]})",
       "/communicators/0/collectives/0", "unknown collective"},
      {R"({"version": 1, "communicators": [{"name": "w", "p2p_tags": ["9-3"]}]})",
       "/communicators/0/p2p_tags/0", "empty"},
      {R"({"version": 1, "communicators": [{"name": "w", "members": "nope"}]})",
       "/communicators/0/members", "unknown group"},
      {R"({"version": 1, "communicators": [{"name": "w", "max_message_bytes": -4}]})",
       "/communicators/0/max_message_bytes", "non-negative"},
      {R"({"version": 1, "audit": {"messages": "payloads"}})", "/audit/messages", "not one of"},
      {R"({"version": 1, "limits": {"max_message_bytes": "1k"}})", "/limits/max_message_bytes",
       "non-negative"},
      // Unsigned numbers are read as written, not wrapped to -1.
      {R"({"version": 1, "groups": {"a": 18446744073709551615}})", "/groups/a",
       "rank 18446744073709551615 is outside"},
      {R"({"version": 1, "communicators": [{"name": "w", "p2p_tags": [18446744073709551615]}]})",
       "/communicators/0/p2p_tags/0", "tag 18446744073709551615 is outside"},
      // Digits no int holds are out of range, not a syntax error.
      {R"({"version": 1, "groups": {"a": "0-99999999999"}})", "/groups/a", "is outside"},
      {R"({"version": 1, "comment": {}})", "/comment", "must be a string"},
      {R"({"version": 1, "communicators": [{"name": "w", "comment": 5}]})",
       "/communicators/0/comment", "must be a string"},
  };
  for (const auto& c : cases) expect_issue(c.text, c.path, c.words);
  try {
    (void)compile(R"({"version": 1, "mode": "x", "groups": {"a": "2-1"}})");
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.error_class(), ErrorClass::config);
    EXPECT_NE(std::string(e.what()).find("/mode"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("/groups/a"), std::string::npos) << e.what();
  }
}

// What the parser would silently resolve one way while a reviewer reads it another: refused.
TEST(PolicyValidation, DuplicateKeysDeepNestingAndOversizedPoliciesAreRefused) {
  const auto refused = [](const std::string& text, const std::string& words) {
    try {
      (void)PolicyDocument::parse(text, "p.json");
      ADD_FAILURE() << "accepted: " << text.substr(0, 80);
    } catch (const Error& e) {
      EXPECT_EQ(e.error_class(), ErrorClass::config);
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  refused(R"({"version": 1, "mode": "enforce", "mode": "audit"})",
          R"(p.json: /: key "mode" appears twice)");
  refused(R"({"version": 1, "groups": {"w": "1-3", "w": "1-4095"}})",
          R"(p.json: /groups: key "w" appears twice)");
  refused(R"({"version": 1, "communicators": [{"name": "a"}, {"name": "b", "name": "c"}]})",
          R"(/communicators/1: key "name" appears twice)");
  // The same key in different objects is fine.
  EXPECT_NO_THROW((void)PolicyDocument::parse(
      R"({"version": 1, "communicators": [{"name": "a"}, {"name": "b"}]})", "p.json"));

  // Nesting would otherwise cost a stack frame per level when the document is copied or
  // printed: half a million levels crashed the parser's users.
  const std::size_t levels = 500000;
  refused(R"({"version": 1, "comment": )" + std::string(levels, '[') + std::string(levels, ']') +
              "}",
          "nested more than 16 deep");

  // The canonical text travels in every rank's welcome message.
  refused(R"({"version": 1, "comment": ")" + std::string(kMaxPolicyBytes, 'x') + R"("})",
          "more than the 262144 a job can carry");
  refused(std::string(kMaxPolicyFileBytes + 1, ' '),
          "p.json: longer than 1048576 bytes, more than a policy may have");
}

// nlohmann reads 99999999999999999999 (no 64-bit integer) as a double, like 1e3 and 1.0: the
// first is a number out of range, not "not a number"; the others are integers written wrongly.
TEST(PolicyValidation, HugeIntegersAreOutOfRangeAndFractionsOrExponentsAreNamedAsSuch) {
  expect_issue(R"({"version": 1, "groups": {"a": 99999999999999999999}})", "/groups/a",
               "integer 1e+20 is out of range for a rank (0..16777215)");
  expect_issue(R"({"version": 1, "groups": {"a": [0, -99999999999999999999]}})", "/groups/a/1",
               "out of range for a rank");
  expect_issue(
      R"({"version": 1, "communicators": [{"name": "w", "p2p_tags": [99999999999999999999]}]})",
      "/communicators/0/p2p_tags/0", "out of range for a tag");
  expect_issue(R"({"version": 1, "limits": {"max_message_bytes": 99999999999999999999}})",
               "/limits/max_message_bytes", "out of range for a byte count");
  expect_issue(R"({"version": 1, "limits": {"max_message_bytes": 1e3}})",
               "/limits/max_message_bytes", "written without exponent or fraction");
  expect_issue(R"({"version": 1, "communicators": [{"name": "w", "max_message_bytes": 1e3}]})",
               "/communicators/0/max_message_bytes", "written without exponent or fraction");
  expect_issue(R"({"version": 1.0})", "/version", "written without exponent or fraction");
  expect_issue(R"({"version": 1, "groups": {"a": 2.5}})", "/groups/a",
               "written without exponent or fraction");
  expect_issue(R"({"version": 1, "communicators": [{"name": "w", "p2p_tags": [1e2]}]})",
               "/communicators/0/p2p_tags/0", "written without exponent or fraction");
}

// from_chars reads a sign: "0--0" was the range 0-0.
TEST(PolicyValidation, ASignInEitherHalfOfARangeIsRefused) {
  expect_issue(R"({"version": 1, "groups": {"a": "0--0"}})", "/groups/a", "is not a range");
  expect_issue(R"({"version": 1, "groups": {"a": ["-0-3"]}})", "/groups/a/0", "is not a range");
  expect_issue(R"({"version": 1, "groups": {"a": "0-+3"}})", "/groups/a", "is not a range");
  expect_issue(R"({"version": 1, "groups": {"a": "-0"}})", "/groups/a", "is not a range");
  expect_issue(R"({"version": 1, "communicators": [{"name": "w", "p2p_tags": ["5--1"]}]})",
               "/communicators/0/p2p_tags/0", "is not a range");
  EXPECT_TRUE(Policy::validate(nlohmann::json::parse(
                                   R"({"version": 1, "groups": {"a": ["0-0", "3", "7-9"]}})"))
                  .empty());
}

// A name or pattern holds up to 256 characters, counted as the schema's maxLength counts them:
// 200 euro signs (600 bytes) are as valid to both, 257 letters to neither.
TEST(PolicyValidation, NameLengthsCountCharactersAsTheSchemaDoes) {
  std::string euros;
  for (int i = 0; i < 200; ++i) euros += "\xe2\x82\xac";
  const nlohmann::json valid = {{"version", 1}, {"communicators", {{{"name", euros}}}}};
  EXPECT_TRUE(Policy::validate(valid).empty());
  const nlohmann::json too_long = {{"version", 1},
                                   {"communicators", {{{"name", std::string(257, 'a')}}}}};
  ASSERT_EQ(Policy::validate(too_long).size(), 1u);
  EXPECT_EQ(Policy::validate(too_long)[0].path, "/communicators/0/name");
}

// A path names the key: "/" and "~" inside a key are escaped (RFC 6901), or the path would
// point somewhere else.
TEST(PolicyValidation, DuplicateKeyPathsEscapeSlashAndTildeInKeys) {
  try {
    (void)PolicyDocument::parse(R"({"version": 1, "groups": {"a/b~c": {"x": 1, "x": 2}}})",
                                "p.json");
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(R"(p.json: /groups/a~1b~0c: key "x" appears twice)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(escape_pointer("a/b~c"), "a~1b~0c");
  EXPECT_EQ(escape_pointer("~1"), "~01");
}

// A device that never ends is read only to the limit, a pipe with no writer reads as empty (no
// wait), one with a writer like a file; directories and missing files are refused.
TEST(PolicyFiles, DevicesAndPipesAreReadWithinTheLimit) {
  EXPECT_EQ(read_policy_file("/dev/zero").size(), kMaxPolicyFileBytes + 1);
  load_refused("/dev/zero", "longer than 1048576 bytes");
  EXPECT_EQ(read_policy_file("/dev/null"), "");
  test::TempDir dir;
  const auto fifo = dir.path() / "policy.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(read_policy_file(fifo), "");
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const std::string text = R"({"version": 1})";
  ASSERT_EQ(::write(fds[1], text.data(), text.size()), static_cast<ssize_t>(text.size()));
  ::close(fds[1]);
  EXPECT_EQ(read_policy_file("/proc/self/fd/" + std::to_string(fds[0])), text);
  ::close(fds[0]);
  load_refused(dir.path(), "is a directory");
  load_refused(dir.path() / "missing.json", "cannot read policy file");
}

TEST(PolicyFiles, AFileLongerThanTheLimitIsReadOnlyOneBytePastIt) {
  test::TempDir dir;
  const auto big = dir.path() / "big.json";
  std::ofstream(big) << "{}";
  std::filesystem::resize_file(big, 64 * kMaxPolicyFileBytes);  // sparse: costs no disk
  EXPECT_EQ(read_policy_file(big).size(), kMaxPolicyFileBytes + 1);
  const auto what = load_refused(big, "longer than 1048576 bytes, more than a policy may have");
  // Had the whole file been read, its size would be known (and reported).
  EXPECT_EQ(what.find(std::to_string(64 * kMaxPolicyFileBytes)), std::string::npos) << what;

  const auto small = dir.path() / "small.json";
  std::ofstream(small) << R"({"version": 1})";
  EXPECT_EQ(read_policy_file(small), R"({"version": 1})");
  EXPECT_FALSE(PolicyDocument::load(small).is_default);
}

TEST(PolicyValidation, RulesShadowedByAnEarlierPrefixAreReported) {
  const auto p = compile(R"({"version": 1, "communicators": [
      {"name": "world*"}, {"name": "world.dup"}, {"name": "worl*"}, {"name": "other"}]})");
  std::string all;
  for (const auto& w : p.warnings(std::nullopt)) all += w.path + ": " + w.message + "\n";
  EXPECT_NE(all.find("/communicators/1: never used: /communicators/0 ('world*')"),
            std::string::npos)
      << all;
  EXPECT_EQ(all.find("/communicators/2:"), std::string::npos) << all;  // matches more
  EXPECT_EQ(all.find("/communicators/3:"), std::string::npos) << all;
}

TEST(PolicyDecisions, SegmentationTagsSizesAndOperations) {
  const auto p = compile(kIo);
  EXPECT_EQ(p.message_audit(), MessageAudit::digest);
  EXPECT_TRUE(p.ever_talk(2, 3));
  EXPECT_TRUE(p.ever_talk(0, 7));   // io <-> all, on io* communicators
  EXPECT_FALSE(p.ever_talk(2, 5));  // left and right never meet
  EXPECT_TRUE(p.ever_talk(5, 5));

  auto d = p.decide({2, 3, "world", kP2p, 15, 10});
  EXPECT_TRUE(d.allowed) << d.explanation;
  EXPECT_NE(d.explanation.find("/segmentation/0"), std::string::npos) << d.explanation;

  d = p.decide({2, 3, "world", kP2p, 5, 10});
  EXPECT_EQ(d.verdict, Verdict::deny_tag);
  EXPECT_EQ(d.rule, "/communicators/0/p2p_tags");
  EXPECT_NE(d.explanation.find("1,10-19"), std::string::npos) << d.explanation;

  d = p.decide({2, 5, "world", kP2p, 1, 10});
  EXPECT_EQ(d.verdict, Verdict::deny_segment);
  EXPECT_EQ(d.rule, "default deny");

  d = p.decide({0, 6, "io.data", kP2p, 77, 1000});
  EXPECT_TRUE(d.allowed) << d.explanation;
  d = p.decide({0, 6, "io.data", kP2p, 77, 1001});
  EXPECT_EQ(d.verdict, Verdict::deny_size);
  EXPECT_EQ(d.rule, "/communicators/1/max_message_bytes");
  d = p.decide({2, 3, "world", kP2p, 1, 5001});
  EXPECT_EQ(d.verdict, Verdict::deny_size);
  EXPECT_EQ(d.rule, "/limits/max_message_bytes");

  d = p.decide({2, 3, "world", kAllreduce, 0, 8});
  EXPECT_EQ(d.verdict, Verdict::deny_op);
  EXPECT_NE(d.explanation.find("barrier, comm_create"), std::string::npos) << d.explanation;
  EXPECT_TRUE(p.decide({2, 3, "world", kBarrier, 0, 0}).allowed);

  d = p.decide({2, 3, "unnamed", kP2p, 1, 0});
  EXPECT_EQ(d.verdict, Verdict::deny_comm_unknown);
  EXPECT_EQ(d.rule, "default deny");
}

TEST(PolicyDecisions, CompiledTableAgreesAndRejectsForgedFrames) {
  const auto p = compile(kIo);
  const auto world = p.compile_comm("world", {0, 1, 2, 3, 4, 5, 6, 7}, 2, 8);
  EXPECT_EQ(world->check(3, kP2p, false, 12, 100), Verdict::allow);
  EXPECT_EQ(world->check(3, kP2p, false, 2, 100), Verdict::deny_tag);
  EXPECT_EQ(world->check(5, kP2p, false, 12, 100), Verdict::deny_segment);
  EXPECT_EQ(world->check(3, kP2p, false, 12, 6000), Verdict::deny_size);
  EXPECT_EQ(world->check(3, kBarrier, true, 0, 0), Verdict::allow);
  EXPECT_EQ(world->check(3, kAllreduce, true, 0, 0), Verdict::deny_op);
  // A collective kind on the point-to-point context (or the reverse) is forged.
  EXPECT_EQ(world->check(3, kBarrier, false, 0, 0), Verdict::deny_op_context);
  EXPECT_EQ(world->check(3, kP2p, true, 12, 0), Verdict::deny_op_context);
  // So is a kind no collective has: refused in audit mode too, not a dry-run deny_op.
  EXPECT_EQ(world->check(3, 999, true, 0, 0), Verdict::deny_op_context);
  EXPECT_EQ(p.decide({3, 2, "world", 999, 0, 0}).verdict, Verdict::deny_op_context);
  EXPECT_EQ(world->check(8, kP2p, false, 12, 0), Verdict::deny_not_member);
  EXPECT_EQ(world->check(-1, kP2p, false, 12, 0), Verdict::deny_not_member);

  const auto sub = p.compile_comm("world.split", {2, 3}, 2, 8);
  EXPECT_EQ(sub->check(1, kP2p, false, 0, 0), Verdict::deny_not_member);
  EXPECT_EQ(sub->check(3, kAllreduce, true, 0, 0), Verdict::allow);
  const auto nameless = p.compile_comm("nameless", {2, 3}, 2, 8);
  EXPECT_EQ(nameless->check(3, kP2p, false, 0, 0), Verdict::deny_comm_unknown);
  // Membership and the operation's context come before the rules: audit mode, which relaxes
  // only the rules, still refuses these on a communicator no rule names.
  EXPECT_EQ(nameless->check(1, kP2p, false, 0, 0), Verdict::deny_not_member);
  EXPECT_EQ(nameless->check(3, kBarrier, false, 0, 0), Verdict::deny_op_context);
  EXPECT_EQ(nameless->check(3, 999, true, 0, 0), Verdict::deny_op_context);
}

TEST(PolicyDecisions, MembershipAndCommunicatorCreation) {
  const auto p = compile(kIo);
  EXPECT_TRUE(p.check_members("world.split", {0, 1, 2}).allowed);
  EXPECT_TRUE(p.check_members("world.split", {4, 7}).allowed);
  const auto d = p.check_members("world.split", {3, 4});
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.rule, "/communicators/2/members");
  EXPECT_NE(d.explanation.find("{3,4}"), std::string::npos) << d.explanation;
  EXPECT_FALSE(p.check_members("not-named", {0}).allowed);
  // Creating from world needs every member to reach member 0: 0..3 can, 0..7 cannot.
  EXPECT_TRUE(p.check_comm_create("world", {0, 1, 2, 3}).allowed);
  const auto c = p.check_comm_create("world", {0, 1, 2, 3, 4});
  EXPECT_FALSE(c.allowed);
  EXPECT_NE(c.explanation.find("rank 4"), std::string::npos) << c.explanation;
  // io* allows no comm_create at all.
  EXPECT_FALSE(p.check_comm_create("io", {0, 1}).allowed);
  EXPECT_FALSE(p.check_comm_create("io", {0}).allowed);
}

TEST(PolicyDecisions, DryRunConnectsEveryoneAndSummaryIsReadable) {
  const auto p = compile(R"({"version": 1, "mode": "audit", "groups": {"a": [0]},
                             "segmentation": [{"between": ["a", "a"]}]})");
  EXPECT_FALSE(p.enforcing());
  EXPECT_TRUE(p.ever_talk(1, 2));  // everything is allowed in a dry run: wire everything
  const auto summary = compile(kIo).summary(8);
  EXPECT_NE(summary.find("never connected"), std::string::npos) << summary;
  EXPECT_NE(summary.find("io*"), std::string::npos) << summary;
  const auto warnings = compile(kIo).warnings(4);
  ASSERT_FALSE(warnings.empty());
  EXPECT_EQ(warnings[0].path, "/groups/right");
}

// The summary's pair count is worked out on rows of bits, one per rank, not by asking
// ever_talk of each pair (which took minutes at 1024 ranks for thousands of rules): it must
// say what ever_talk says, across word boundaries, with "*", overlapping groups and ranges past
// the job.
TEST(PolicyDecisions, SummaryCountsThePairsEverTalkConnects) {
  const auto p = compile(R"({"version": 1, "groups": {
      "low": "0-63", "edge": [63, 64, 127, 128], "far": "100-5000", "one": 7, "none": []},
    "segmentation": [{"between": ["low", "one"]}, {"between": ["edge", "edge"]},
                     {"between": ["far", "one"], "communicators": ["x*"]},
                     {"between": ["one", "far"]}, {"between": ["none", "*"]},
                     {"between": ["*", "edge"], "communicators": ["y"]}]})");
  for (const int ranks : {1, 2, 63, 64, 65, 130}) {
    long long never = 0;
    std::string pairs;
    for (int a = 0; a < ranks; ++a) {
      for (int b = a + 1; b < ranks; ++b) {
        if (p.ever_talk(a, b)) continue;
        if (++never <= 32)
          pairs += (pairs.empty() ? "" : " ") + std::to_string(a) + "-" + std::to_string(b);
      }
    }
    const long long total = static_cast<long long>(ranks) * (ranks - 1) / 2;
    std::string expected = "with " + std::to_string(ranks) +
                           " ranks: " + std::to_string(total - never) + " of " +
                           std::to_string(total) + " rank pairs are connected";
    if (never > 0) expected += "; never connected: " + pairs + (never > 32 ? " ..." : "");
    const auto summary = p.summary(ranks);
    EXPECT_NE(summary.find(expected + "\n"), std::string::npos) << expected << "\n" << summary;
  }
}

// world and self are created by the runtime with fixed members; an explicit "members": [] is
// not the same text as a rule that leaves the key out.
TEST(PolicyDecisions, SummaryTellsFixedEmptyAndMissingMemberListsApart) {
  const auto summary = compile(R"({"version": 1, "communicators": [
      {"name": "world"}, {"name": "self"}, {"name": "empty", "members": []}, {"name": "bare"}]})")
                           .summary(std::nullopt);
  EXPECT_NE(summary.find("[0] world: members all ranks (world always);"), std::string::npos)
      << summary;
  EXPECT_NE(summary.find("[1] self: members the rank itself (self always);"), std::string::npos)
      << summary;
  EXPECT_NE(summary.find("[2] empty: members [] (none);"), std::string::npos) << summary;
  EXPECT_NE(summary.find("[3] bare: members none (no 'members');"), std::string::npos)
      << summary;
}

// A pattern that is world's (or self's) rule governs it without its member check: the summary
// must not read as if world had only the rule's members.
TEST(PolicyDecisions, SummarySaysWhenAPatternIsWorldsRule) {
  const auto summary = compile(R"({"version": 1, "groups": {"red": "0-1"}, "communicators": [
      {"name": "*", "members": ["red"], "p2p_tags": "*"}]})")
                           .summary(std::nullopt);
  EXPECT_NE(summary.find("[0] *: members within one of red (world and self, which this rule "
                         "also governs, keep their fixed members: all ranks, the rank itself);"),
            std::string::npos)
      << summary;
  const auto world_only = compile(R"({"version": 1, "groups": {"red": "0-1"}, "communicators": [
      {"name": "self"}, {"name": "w*", "members": ["red"]}]})")
                              .summary(std::nullopt);
  EXPECT_NE(world_only.find("[1] w*: members within one of red (world, which this rule also "
                            "governs, keeps its fixed members: all ranks);"),
            std::string::npos)
      << world_only;
}

TEST(PolicyNames, PatternsMatchExactPrefixAndStar) {
  EXPECT_TRUE(name_matches("*", "world"));
  EXPECT_TRUE(name_matches("world*", "world.split.dup"));
  EXPECT_TRUE(name_matches("world", "world"));
  EXPECT_FALSE(name_matches("world", "world.dup"));
  EXPECT_FALSE(name_matches("io*", "world"));
}

}  // namespace
}  // namespace sempi::policy
