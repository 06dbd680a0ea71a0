//! Picks each next token and reports the log-probability it was drawn with.

use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use reverie_core::SamplingParams;

use crate::error::InferError;

/// A constraint on what the model may write.
#[derive(Debug, Clone, PartialEq)]
pub enum Constraint {
    /// A GBNF grammar whose start rule is `root`.
    Gbnf(String),
    /// A JSON schema; the output is a JSON value that satisfies it.
    JsonSchema(serde_json::Value),
    /// A GBNF grammar that stays asleep over free text and holds the output
    /// to it from the first match of a trigger (a tool call opening): a
    /// regular expression, searched in the text so far (from its first
    /// capture group when it has one), or a token.
    Lazy {
        gbnf: String,
        patterns: Vec<String>,
        tokens: Vec<i32>,
    },
}

pub struct TokenPicker {
    grammar: Option<LlamaSampler>,
    /// `None` means greedy.
    chain: Option<LlamaSampler>,
}

impl TokenPicker {
    pub fn new(
        model: &LlamaModel,
        params: &SamplingParams,
        constraint: Option<&Constraint>,
    ) -> Result<TokenPicker, InferError> {
        let grammar = match constraint {
            None => None,
            Some(c) => {
                let grammar = match c {
                    Constraint::Gbnf(g) => LlamaSampler::grammar(model, g, "root"),
                    Constraint::JsonSchema(s) => {
                        LlamaSampler::grammar(model, &crate::json_schema_to_gbnf(s)?, "root")
                    }
                    Constraint::Lazy {
                        gbnf,
                        patterns,
                        tokens,
                    } => {
                        let tokens: Vec<_> = tokens.iter().map(|&t| LlamaToken(t)).collect();
                        LlamaSampler::grammar_lazy_patterns(model, gbnf, "root", patterns, &tokens)
                    }
                };
                Some(grammar.map_err(|e| {
                    InferError::Grammar(format!(
                        "{e}; check the GBNF syntax, that it has a `root` rule and that trigger patterns are valid regular expressions"
                    ))
                })?)
            }
        };
        let chain = (params.temperature > 0.0).then(|| {
            let mut stages = Vec::new();
            if params.top_k > 0 {
                stages.push(LlamaSampler::top_k(params.top_k));
            }
            if params.top_p < 1.0 {
                stages.push(LlamaSampler::top_p(params.top_p, 1));
            }
            stages.push(LlamaSampler::temp(params.temperature));
            stages.push(LlamaSampler::dist(params.seed));
            LlamaSampler::chain_simple(stages)
        });
        Ok(TokenPicker { grammar, chain })
    }

    /// Samples from the logits at batch index `idx`. The log-probability is
    /// that of the distribution actually sampled from (after the grammar,
    /// top-k, top-p and temperature); for greedy decoding it is the model's
    /// own temperature-1 log-probability among the tokens the grammar allows.
    pub fn pick(
        &mut self,
        ctx: &LlamaContext<'_>,
        idx: i32,
    ) -> Result<(LlamaToken, f32), InferError> {
        let mut arr = ctx.token_data_array_ith(idx);
        if let Some(g) = self.grammar.as_mut() {
            arr.apply_sampler(g);
        }
        match self.chain.as_mut() {
            Some(chain) => {
                arr.apply_sampler(chain);
                let sel = arr
                    .selected
                    .ok_or_else(|| InferError::Generation("sampler selected no token".into()))?;
                let d = &arr.data[sel];
                Ok((d.id(), d.p().max(f32::MIN_POSITIVE).ln()))
            }
            None => {
                let (best, max) = arr.data.iter().enumerate().fold(
                    (None, f32::NEG_INFINITY),
                    |(b, m), (i, d)| {
                        if d.logit() > m {
                            (Some(i), d.logit())
                        } else {
                            (b, m)
                        }
                    },
                );
                let best = best.ok_or_else(|| {
                    InferError::Generation("no token is allowed here (grammar dead end)".into())
                })?;
                let sum: f64 = arr
                    .data
                    .iter()
                    .map(|d| ((d.logit() - max) as f64).exp())
                    .sum();
                Ok((arr.data[best].id(), -(sum.ln() as f32)))
            }
        }
    }

    pub fn accept(&mut self, token: LlamaToken) {
        if let Some(g) = self.grammar.as_mut() {
            g.accept(token);
        }
        if let Some(c) = self.chain.as_mut() {
            c.accept(token);
        }
    }
}
