// Byte-level BPE tokenizer loaded from a Hugging Face tokenizer.json (GPT-2, Qwen2/Qwen3 and
// Llama-3 families): added-token splitting, optional NFC, regex pre-tokenization, byte-level
// mapping, rank-ordered BPE merges, the post-processor's special tokens around a sequence.
// Produces the same ids as the `tokenizers` library.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/json_fields.h"
#include "base/status.h"
#include "text/pretokenizer.h"

namespace omni_edge::text {

using TokenId = int32_t;

class Tokenizer {
 public:
  static Result<std::unique_ptr<Tokenizer>> Load(const std::string& tokenizer_json_path);
  static Result<std::unique_ptr<Tokenizer>> FromJson(const Json& j);

  // Added tokens (<|im_start|>, ...) in `text` are matched as themselves; invalid UTF-8 is refused.
  // `add_special_tokens`: the post-processor's tokens around the text (Llama 3's
  // <|begin_of_text|> before it), as `tokenizers` adds them by default; a chat prompt already
  // holds its markers in the text and passes false, as apply_chat_template does.
  Result<std::vector<TokenId>> Encode(std::string_view text, bool add_special_tokens) const;

  // The bytes a token stands for: byte-level tokens map back to raw bytes (possibly a
  // partial UTF-8 character), added tokens to their text; special tokens give "" when
  // `skip_special` is set.
  std::string TokenBytes(TokenId id, bool skip_special = true) const;
  std::string Decode(const std::vector<TokenId>& ids, bool skip_special = true) const;

  std::optional<TokenId> Find(std::string_view token) const;
  bool IsSpecial(TokenId id) const;
  int64_t vocab_size() const { return int64_t(id_to_token_.size()); }

 private:
  struct AddedToken {
    std::string content;
    TokenId id;
    bool special;
  };

  Tokenizer() = default;
  // The parts of FromJson: the BPE model (vocab, merges) with the added tokens, the
  // pre-tokenizer, and the byte-level alphabet's maps.
  Status ReadModel(const Json& j);
  Status ReadMerges(const Json& merges);
  Status ReadPreTokenizer(const Json& pre);
  Status ReadPostProcessor(const Json& post, int depth = 0);
  Status MapBytes();
  void EncodeSegment(std::string_view text, std::vector<TokenId>* out) const;
  void EncodeWord(const std::string& byte_level_word, std::vector<TokenId>* out) const;

  std::unordered_map<std::string, TokenId> vocab_;  // byte-level token text -> id
  std::vector<std::string> id_to_token_;
  std::unordered_map<uint64_t, std::pair<int32_t, TokenId>> merges_;  // (left, right) -> (rank, merged)
  std::vector<AddedToken> added_;                                     // longest content first
  std::vector<int8_t> added_kind_;                                    // per id: 0 = regular, 1 = added, 2 = special
  std::string byte_to_char_[256];                                     // byte -> UTF-8 of its byte-level char
  std::unordered_map<char32_t, uint8_t> char_to_byte_;
  std::optional<PretokenizerKind> pretokenizer_;  // a Split regex before ByteLevel
  bool byte_level_regex_ = false;  // ByteLevel(use_regex=true) splits each piece with the GPT-2 pattern
  bool add_prefix_space_ = false;
  bool nfc_ = false;
  bool ignore_merges_ = false;
  // A byte-level character with no token of its own (real vocabularies lack a few control
  // bytes): the model's unk token where it names one (consecutive ones fused if it says so),
  // else dropped, as `tokenizers` does.
  std::optional<TokenId> unk_id_;
  bool fuse_unk_ = false;
  // The post-processor's ids before and after a single sequence (TemplateProcessing's `single`,
  // Bert's and Roberta's cls/sep); empty for ByteLevel (offsets only) and none.
  std::vector<TokenId> before_sequence_, after_sequence_;
};

}  // namespace omni_edge::text
