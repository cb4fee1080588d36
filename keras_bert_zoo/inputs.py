"""The names of BERT's model inputs, as TF Model Garden and TF Hub spell them.

One home for them: the packer and preprocessor produce these keys, the encoder and
every task model take them, and exported signatures expose them. `MASKED_LM_POSITIONS`
is the pretrainer's fourth input (the positions its masked-LM head reads);
`TEACHER_OUTPUTS` carries a distillation teacher's cached outputs beside a student's
inputs.
"""

INPUT_WORD_IDS = "input_word_ids"
INPUT_MASK = "input_mask"
INPUT_TYPE_IDS = "input_type_ids"
MASKED_LM_POSITIONS = "masked_lm_positions"
TEACHER_OUTPUTS = "teacher_outputs"

ENCODER_INPUT_NAMES = (INPUT_WORD_IDS, INPUT_MASK, INPUT_TYPE_IDS)
