#include "text/tokenizer.h"

#include <algorithm>
#include <queue>

#include "base/platform/os.h"
#include "base/unicode/unicode.h"

namespace omni_edge::text {
namespace {

Status Unsupported(const std::string& what) { return Status::Error("unsupported_tokenizer", "tokenizer.json: " + what); }
Status Invalid(const std::string& what) { return Status::Error("invalid_tokenizer", "tokenizer.json: " + what); }

uint64_t PairKey(TokenId a, TokenId b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }

// GPT-2's reversible byte <-> printable character map.
std::vector<char32_t> ByteLevelAlphabet() {
  std::vector<char32_t> map(256, 0);
  std::vector<bool> direct(256, false);
  for (int b = '!'; b <= '~'; ++b) direct[b] = true;
  for (int b = 0xA1; b <= 0xAC; ++b) direct[b] = true;
  for (int b = 0xAE; b <= 0xFF; ++b) direct[b] = true;
  int next = 0;
  for (int b = 0; b < 256; ++b) map[b] = direct[b] ? char32_t(b) : char32_t(256 + next++);
  return map;
}

// Reads the normalizer: null, NFC, or a Sequence of those.
Status ReadNormalizer(const Json& n, bool* nfc, int depth = 0) {
  if (n.is_null()) return Status::Ok();
  if (!n.is_object() || depth > 8) return Invalid("normalizer must be an object with a type");
  OE_ASSIGN_OR_RETURN(std::string type, GetString(n, "type", "", "tokenizer.json normalizer"));
  if (type == "NFC") {
    *nfc = true;
    return Status::Ok();
  }
  if (type == "Sequence" && n.contains("normalizers") && n["normalizers"].is_array()) {
    for (const auto& item : n["normalizers"]) OE_RETURN_IF_ERROR(ReadNormalizer(item, nfc, depth + 1));
    return Status::Ok();
  }
  return Unsupported("normalizer '" + type + "'");
}

Result<TokenId> ReadId(const Json& v, const std::string& what) {
  if (!v.is_number_integer()) return Invalid(what + " is not an integer id");
  int64_t id = 0;
  if (!CheckInt(v, what, 0, &id).ok() || id > 10'000'000) return Invalid(what + " is not a valid id");
  return TokenId(id);
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> Tokenizer::Load(const std::string& path) {
  auto text = platform::ReadWholeFile(path);
  if (!text.ok()) return Status::Error(text.status().reason(), path + ": cannot open tokenizer");
  OE_ASSIGN_OR_RETURN(Json j, ParseJson(*text, path));
  return FromJson(j);
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::FromJson(const Json& j) {
  std::unique_ptr<Tokenizer> t(new Tokenizer());
  if (!j.is_object() || !j.contains("model") || !j["model"].is_object()) return Invalid("missing model");
  OE_RETURN_IF_ERROR(t->ReadModel(j));
  if (j.contains("normalizer")) OE_RETURN_IF_ERROR(ReadNormalizer(j["normalizer"], &t->nfc_));
  OE_RETURN_IF_ERROR(t->ReadPreTokenizer(j.contains("pre_tokenizer") ? j["pre_tokenizer"] : Json()));
  if (j.contains("post_processor")) OE_RETURN_IF_ERROR(t->ReadPostProcessor(j["post_processor"]));
  OE_RETURN_IF_ERROR(t->MapBytes());
  return t;
}

Status Tokenizer::ReadModel(const Json& j) {
  const Json& model = j["model"];
  const std::string where = "tokenizer.json model";
  OE_ASSIGN_OR_RETURN(std::string type, GetString(model, "type", "", where));
  if (type != "BPE") return Unsupported("model type must be BPE");
  OE_ASSIGN_OR_RETURN(bool byte_fallback, GetBool(model, "byte_fallback", false, where));
  if (byte_fallback) return Unsupported("byte_fallback BPE");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    OE_ASSIGN_OR_RETURN(std::string affix, GetString(model, key, "", where));
    if (!affix.empty()) return Unsupported(std::string(key));
  }
  OE_ASSIGN_OR_RETURN(ignore_merges_, GetBool(model, "ignore_merges", false, where));
  OE_ASSIGN_OR_RETURN(fuse_unk_, GetBool(model, "fuse_unk", false, where));

  if (!model.contains("vocab") || !model["vocab"].is_object()) return Invalid("model.vocab must be an object");
  TokenId max_id = -1;
  for (auto it = model["vocab"].begin(); it != model["vocab"].end(); ++it) {
    OE_ASSIGN_OR_RETURN(TokenId id, ReadId(it.value(), "vocab id of '" + it.key() + "'"));
    vocab_[it.key()] = id;
    max_id = std::max(max_id, id);
  }
  OE_ASSIGN_OR_RETURN(std::string unk, GetString(model, "unk_token", "", where));
  if (!unk.empty()) {
    auto it = vocab_.find(unk);
    if (it == vocab_.end()) return Invalid("model.unk_token '" + unk + "' is not in the vocabulary");
    unk_id_ = it->second;
  }
  std::vector<AddedToken> added;
  if (j.contains("added_tokens") && j["added_tokens"].is_array()) {
    for (const auto& a : j["added_tokens"]) {
      if (!a.is_object() || !a.contains("id") || !a.contains("content") || !a["content"].is_string()) {
        return Invalid("added_tokens entries need an id and content");
      }
      OE_ASSIGN_OR_RETURN(TokenId id, ReadId(a["id"], "added token id"));
      OE_ASSIGN_OR_RETURN(bool special, GetBool(a, "special", false, "tokenizer.json added_tokens"));
      added.push_back(AddedToken{a["content"].get<std::string>(), id, special});
      if (added.back().content.empty()) return Invalid("an added token has empty content");
      max_id = std::max(max_id, id);
    }
  }
  id_to_token_.assign(size_t(max_id) + 1, "");
  added_kind_.assign(size_t(max_id) + 1, 0);
  for (const auto& [token, id] : vocab_) id_to_token_[size_t(id)] = token;
  for (auto& a : added) {
    id_to_token_[size_t(a.id)] = a.content;
    added_kind_[size_t(a.id)] = a.special ? 2 : 1;
    added_.push_back(std::move(a));
  }
  std::stable_sort(added_.begin(), added_.end(),
                   [](const AddedToken& a, const AddedToken& b) { return a.content.size() > b.content.size(); });
  if (!model.contains("merges") || !model["merges"].is_array()) return Invalid("model.merges must be an array");
  return ReadMerges(model["merges"]);
}

Status Tokenizer::ReadMerges(const Json& merges) {
  int32_t rank = 0;
  for (const auto& m : merges) {
    std::string left, right;
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) return Invalid("merge '" + s + "'");
      left = s.substr(0, space), right = s.substr(space + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      left = m[0].get<std::string>(), right = m[1].get<std::string>();
    } else {
      return Invalid("merges must be 'a b' strings or [a, b] pairs");
    }
    auto l = vocab_.find(left), r = vocab_.find(right), lr = vocab_.find(left + right);
    if (l == vocab_.end() || r == vocab_.end() || lr == vocab_.end()) {
      return Invalid("merge '" + left + " " + right + "' uses tokens missing from the vocab");
    }
    merges_.emplace(PairKey(l->second, r->second), std::make_pair(rank++, lr->second));
  }
  return Status::Ok();
}

// ByteLevel, or Sequence[Split(regex, Isolated), ByteLevel(use_regex=false)].
Status Tokenizer::ReadPreTokenizer(const Json& pre) {
  std::vector<Json> steps;
  const std::string pw = "tokenizer.json pre_tokenizer";
  if (pre.is_object()) {
    OE_ASSIGN_OR_RETURN(std::string pre_type, GetString(pre, "type", "", pw));
    if (pre_type == "Sequence") {
      if (!pre.contains("pretokenizers") || !pre["pretokenizers"].is_array()) {
        return Invalid("a Sequence pre-tokenizer needs pretokenizers");
      }
      for (const auto& s : pre["pretokenizers"]) steps.push_back(s);
    } else {
      steps.push_back(pre);
    }
  }
  bool byte_level = false;
  for (const auto& s : steps) {
    if (!s.is_object()) return Invalid("pre-tokenizers must be objects");
    OE_ASSIGN_OR_RETURN(std::string step_type, GetString(s, "type", "", pw));
    if (step_type == "Split") {
      if (pretokenizer_) return Unsupported("more than one Split pre-tokenizer");
      OE_ASSIGN_OR_RETURN(std::string behavior, GetString(s, "behavior", "", pw));
      OE_ASSIGN_OR_RETURN(bool invert, GetBool(s, "invert", false, pw));
      if (behavior != "Isolated" || invert) return Unsupported("Split pre-tokenizer must be Isolated and not inverted");
      if (!s.contains("pattern") || !s["pattern"].is_object() || !s["pattern"].contains("Regex") ||
          !s["pattern"]["Regex"].is_string()) {
        return Unsupported("Split pre-tokenizer without a Regex pattern");
      }
      OE_ASSIGN_OR_RETURN(pretokenizer_, PretokenizerForPattern(s["pattern"]["Regex"].get<std::string>()));
    } else if (step_type == "ByteLevel") {
      byte_level = true;
      OE_ASSIGN_OR_RETURN(add_prefix_space_, GetBool(s, "add_prefix_space", false, pw));
      OE_ASSIGN_OR_RETURN(byte_level_regex_, GetBool(s, "use_regex", true, pw));
    } else {
      return Unsupported("pre-tokenizer '" + step_type + "'");
    }
  }
  if (!byte_level) return Unsupported("only byte-level BPE is supported (no ByteLevel pre-tokenizer)");
  return Status::Ok();
}

// null, ByteLevel (it moves offsets, not ids), TemplateProcessing, Bert/RobertaProcessing, or a
// Sequence of those. Only the single-sequence form matters here: a prompt is one sequence.
Status Tokenizer::ReadPostProcessor(const Json& post, int depth) {
  if (post.is_null()) return Status::Ok();
  const std::string where = "tokenizer.json post_processor";
  if (!post.is_object() || depth > 8) return Invalid("post_processor must be an object with a type");
  OE_ASSIGN_OR_RETURN(std::string type, GetString(post, "type", "", where));
  // The tokens around the sequence; only one post-processor of a Sequence may add them.
  auto around = [&](std::vector<TokenId> before, std::vector<TokenId> after) -> Status {
    if (!before_sequence_.empty() || !after_sequence_.empty()) return Unsupported("more than one post-processor adds tokens");
    for (const auto* ids : {&before, &after}) {
      for (TokenId id : *ids) {
        if (size_t(id) >= id_to_token_.size()) return Invalid(type + " names id " + std::to_string(id) + ", not in the vocabulary");
      }
    }
    before_sequence_ = std::move(before), after_sequence_ = std::move(after);
    return Status::Ok();
  };
  if (type == "ByteLevel") return Status::Ok();
  if (type == "Sequence") {
    if (!post.contains("processors") || !post["processors"].is_array()) return Invalid("a Sequence post-processor needs processors");
    for (const auto& p : post["processors"]) OE_RETURN_IF_ERROR(ReadPostProcessor(p, depth + 1));
    return Status::Ok();
  }
  if (type == "BertProcessing" || type == "RobertaProcessing") {  // cls, the sequence, sep
    std::vector<TokenId> ids;
    for (const char* key : {"cls", "sep"}) {
      if (!post.contains(key) || !post[key].is_array() || post[key].size() != 2) return Invalid(type + " needs " + key + " as [token, id]");
      OE_ASSIGN_OR_RETURN(TokenId id, ReadId(post[key][1], type + " " + key));
      ids.push_back(id);
    }
    return around({ids[0]}, {ids[1]});
  }
  if (type != "TemplateProcessing") return Unsupported("post-processor '" + type + "'");
  if (!post.contains("single") || !post["single"].is_array()) return Invalid("TemplateProcessing needs a single template");
  const Json specials = post.contains("special_tokens") && post["special_tokens"].is_object() ? post["special_tokens"] : Json::object();
  std::vector<TokenId> before, after;
  bool sequence = false;
  for (const auto& piece : post["single"]) {
    if (piece.is_object() && piece.size() == 1 && piece.contains("Sequence")) {
      if (sequence) return Invalid("TemplateProcessing's single template holds the sequence twice");
      sequence = true;
      continue;
    }
    if (!piece.is_object() || piece.size() != 1 || !piece.contains("SpecialToken") || !piece["SpecialToken"].is_object()) {
      return Invalid("TemplateProcessing's single template holds Sequence and SpecialToken pieces only");
    }
    OE_ASSIGN_OR_RETURN(std::string name, GetString(piece["SpecialToken"], "id", "", where));
    if (!specials.contains(name) || !specials[name].is_object() || !specials[name].contains("ids") ||
        !specials[name]["ids"].is_array()) {
      return Invalid("TemplateProcessing's special token '" + name + "' has no ids in special_tokens");
    }
    for (const auto& v : specials[name]["ids"]) {
      OE_ASSIGN_OR_RETURN(TokenId id, ReadId(v, "TemplateProcessing id of '" + name + "'"));
      (sequence ? after : before).push_back(id);
    }
  }
  if (!sequence) return Invalid("TemplateProcessing's single template has no Sequence");
  return around(std::move(before), std::move(after));
}

Status Tokenizer::MapBytes() {
  const auto alphabet = ByteLevelAlphabet();
  for (int b = 0; b < 256; ++b) {
    std::string utf8;
    unicode::AppendUtf8(alphabet[b], &utf8);
    byte_to_char_[b] = utf8;  // a byte without a token is the unk token or dropped (EncodeWord)
    char_to_byte_[alphabet[b]] = uint8_t(b);
  }
  return Status::Ok();
}

std::optional<TokenId> Tokenizer::Find(std::string_view token) const {
  for (const auto& a : added_) {
    if (a.content == token) return a.id;
  }
  auto it = vocab_.find(std::string(token));
  return it == vocab_.end() ? std::nullopt : std::optional<TokenId>(it->second);
}

bool Tokenizer::IsSpecial(TokenId id) const {
  return id >= 0 && size_t(id) < added_kind_.size() && added_kind_[size_t(id)] == 2;
}

void Tokenizer::EncodeWord(const std::string& word, std::vector<TokenId>* out) const {
  if (ignore_merges_) {
    auto whole = vocab_.find(word);
    if (whole != vocab_.end()) {
      out->push_back(whole->second);
      return;
    }
  }
  // Symbols as a linked list over the word's byte-level characters.
  struct Symbol {
    TokenId id;
    int prev, next;
  };
  std::vector<Symbol> symbols;
  for (size_t i = 0; i < word.size();) {
    size_t len = 1;
    const auto b = uint8_t(word[i]);
    if (b >= 0xF0) len = 4;
    else if (b >= 0xE0) len = 3;
    else if (b >= 0xC0) len = 2;
    auto known = vocab_.find(word.substr(i, len));
    i += len;
    TokenId id;
    if (known != vocab_.end()) {
      id = known->second;
    } else if (unk_id_ && !(fuse_unk_ && !symbols.empty() && symbols.back().id == *unk_id_)) {
      id = *unk_id_;
    } else {
      continue;
    }
    symbols.push_back({id, int(symbols.size()) - 1, int(symbols.size()) + 1});
  }
  if (symbols.empty()) return;
  symbols.back().next = -1;
  // Lowest rank first; among equal ranks the leftmost (as `tokenizers` does).
  using Candidate = std::tuple<int32_t, int, TokenId, TokenId>;  // rank, left position, left id, right id
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  auto push = [&](int left) {
    const int right = symbols[size_t(left)].next;
    if (right < 0) return;
    auto it = merges_.find(PairKey(symbols[size_t(left)].id, symbols[size_t(right)].id));
    if (it != merges_.end()) queue.emplace(it->second.first, left, symbols[size_t(left)].id, symbols[size_t(right)].id);
  };
  for (int i = 0; i + 1 < int(symbols.size()); ++i) push(i);
  std::vector<bool> removed(symbols.size(), false);
  while (!queue.empty()) {
    auto [rank, left, left_id, right_id] = queue.top();
    queue.pop();
    const int right = symbols[size_t(left)].next;
    // Skip candidates made stale by an earlier merge.
    if (removed[size_t(left)] || right < 0 || symbols[size_t(left)].id != left_id || symbols[size_t(right)].id != right_id) {
      continue;
    }
    symbols[size_t(left)].id = merges_.at(PairKey(left_id, right_id)).second;
    removed[size_t(right)] = true;
    symbols[size_t(left)].next = symbols[size_t(right)].next;
    if (symbols[size_t(left)].next >= 0) symbols[size_t(symbols[size_t(left)].next)].prev = left;
    if (symbols[size_t(left)].prev >= 0) push(symbols[size_t(left)].prev);
    push(left);
  }
  for (int i = 0; i >= 0; i = symbols[size_t(i)].next) out->push_back(symbols[size_t(i)].id);
}

void Tokenizer::EncodeSegment(std::string_view text, std::vector<TokenId>* out) const {
  // `text` is valid UTF-8 (checked by Encode).
  std::u32string cps = unicode::DecodeUtf8(text).value();
  if (nfc_) cps = unicode::Nfc(cps);
  // As `tokenizers` does: the Split regex first, then ByteLevel on every piece (which adds a
  // prefix space to each piece when asked, then splits it with the GPT-2 regex when asked).
  std::vector<std::u32string_view> pieces;
  if (pretokenizer_) {
    pieces = Pretokenize(cps, *pretokenizer_);
  } else {
    pieces.push_back(cps);
  }
  std::string word;
  std::u32string prefixed;
  for (auto piece : pieces) {
    if (add_prefix_space_ && (piece.empty() || piece[0] != U' ')) {
      prefixed = U" ";
      prefixed += piece;
      piece = prefixed;
    }
    std::vector<std::u32string_view> words;
    if (byte_level_regex_) {
      words = Pretokenize(piece, PretokenizerKind::kGpt2);
    } else {
      words.push_back(piece);
    }
    for (auto w : words) {
      word.clear();
      for (uint8_t byte : unicode::EncodeUtf8(w)) word += byte_to_char_[byte];
      EncodeWord(word, out);
    }
  }
}

Result<std::vector<TokenId>> Tokenizer::Encode(std::string_view text, bool add_special_tokens) const {
  OE_RETURN_IF_ERROR(unicode::DecodeUtf8(text).status());
  std::vector<TokenId> ids;
  if (add_special_tokens) ids = before_sequence_;
  size_t start = 0, i = 0;
  while (i < text.size()) {
    const AddedToken* hit = nullptr;
    for (const auto& a : added_) {
      if (text.compare(i, a.content.size(), a.content) == 0) {
        hit = &a;
        break;
      }
    }
    if (hit == nullptr) {
      ++i;
      continue;
    }
    if (i > start) EncodeSegment(text.substr(start, i - start), &ids);
    ids.push_back(hit->id);
    i += hit->content.size();
    start = i;
  }
  if (start < text.size()) EncodeSegment(text.substr(start), &ids);
  if (add_special_tokens) ids.insert(ids.end(), after_sequence_.begin(), after_sequence_.end());
  return ids;
}

std::string Tokenizer::TokenBytes(TokenId id, bool skip_special) const {
  if (id < 0 || size_t(id) >= id_to_token_.size()) return "";
  const int8_t kind = added_kind_[size_t(id)];
  if (kind == 2 && skip_special) return "";
  if (kind != 0) return id_to_token_[size_t(id)];
  std::string bytes;
  auto cps = unicode::DecodeUtf8(id_to_token_[size_t(id)]);
  if (!cps.ok()) return "";
  for (char32_t c : cps.value()) {
    auto it = char_to_byte_.find(c);
    if (it != char_to_byte_.end()) bytes.push_back(char(it->second));
  }
  return bytes;
}

std::string Tokenizer::Decode(const std::vector<TokenId>& ids, bool skip_special) const {
  std::string out;
  for (TokenId id : ids) out += TokenBytes(id, skip_special);
  return out;
}

}  // namespace omni_edge::text
