"""Data for RNN Lab: corpora, tokenizers, batches and sequential-image datasets.

Four modules, each importable alone, none importing anything of the lab's but lab.errors, lab.schema and each
other (text <- tokenizers, windows, images): text.py (reading and the corpora), tokenizers.py,
windows.py (batches), images.py (pixel sequences). Every public name is importable from lab.data.

Dimensions used in shape comments:
    N  number of tokens in a corpus (or of samples in a dataset)
    B  batch size (also: number of parallel streams in ConsecutiveWindows)
    T  block size, the number of time steps in one training window
    V  vocabulary size
    K  n_max - 1, the width of a padded n-gram context
    L  length of a pixel sequence (32 * 32 = 1024 for CIFAR-10)

Public names, one line each:
    DataError                  bad user data: a ValueError whose message says what is wrong
    MAX_CORPUS_BYTES           the largest text read_text accepts (20 MB)
    read_at_most               a file's bytes, never more than a limit + 1, whatever its size claims
    read_text                  validate and decode a user-supplied text file or upload
    check_long_enough          raise DataError when a corpus cannot fill one training window
    BUNDLED_CORPUS             folder of the shipped Shakespeare corpus (35 plays, 4.6 MB)
    load_bundled_split         the shipped corpus as (training plays, validation plays), no network
    load_bundled_corpus        the same as one text
    split_text                 a text's contiguous split: the first 1 - val_fraction, the rest
    TINY_SHAKESPEARE_URL       where karpathy's Tiny Shakespeare lives
    TINY_SHAKESPEARE_SHA256    SHA-256 of its 1,115,394 bytes
    default_cache_dir          RNNLAB_CACHE (lab.settings): where downloads are kept
    download_tiny_shakespeare  optional download, hash-checked and cached on disk
    CharTokenizer              one token per character
    SentencePieceTokenizer     BPE or unigram subwords, trained in memory
    TOKENIZERS                 kind -> tokenizer class
    build_tokenizer            make a tokenizer of a given kind from a text
    tokenizer_from_state       rebuild a tokenizer from its to_state() dict (checkpoints)
    chars_per_token            average characters per token of a tokenizer on a text
    encode_to_tensor           a whole corpus as one LongTensor of token ids
    split_train_val            contiguous train / validation split of a token tensor
    random_windows             a batch of random (x, y) windows, nanoGPT style
    ConsecutiveWindows         consecutive (x, y) windows for truncated BPTT
    ngram_samples              mixed 2..5-gram (context, target) samples for ScanMarkov
    FlattenSequence            transform: image (C, H, W) -> sequence (H*W, C)
    cifar10_transform          Grayscale -> ToTensor -> Normalize -> FlattenSequence
    load_cifar10               CIFAR-10 as 1024-step grayscale pixel sequences
    load_digits_sequences      scikit-learn's digits as pixel sequences (offline)
    SequenceDatasetInfo        what the UI needs to know about a sequence dataset
    SEQUENCE_DATASETS          name -> SequenceDatasetInfo
    load_sequence_dataset      load one of SEQUENCE_DATASETS by name
"""

from lab.data.images import (  # noqa: F401 - the package's public names
    SEQUENCE_DATASETS,
    FlattenSequence,
    SequenceDatasetInfo,
    cifar10_transform,
    load_cifar10,
    load_digits_sequences,
    load_sequence_dataset,
)
from lab.data.text import (  # noqa: F401 - the package's public names
    BUNDLED_CORPUS,
    MAX_CORPUS_BYTES,
    TINY_SHAKESPEARE_SHA256,
    TINY_SHAKESPEARE_URL,
    DataError,
    check_long_enough,
    default_cache_dir,
    download_tiny_shakespeare,
    load_bundled_corpus,
    load_bundled_split,
    read_at_most,
    read_text,
)
from lab.data.tokenizers import (  # noqa: F401 - the package's public names
    TOKENIZERS,
    CharTokenizer,
    SentencePieceTokenizer,
    build_tokenizer,
    chars_per_token,
    encode_to_tensor,
    tokenizer_from_state,
)
from lab.data.windows import (  # noqa: F401 - the package's public names
    ConsecutiveWindows,
    ngram_samples,
    random_windows,
    split_text,
    split_train_val,
)
