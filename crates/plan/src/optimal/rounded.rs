//! The search's first start: the relaxation's solution made whole (see
//! [`crate::round`]), its support's choices per service purified down to
//! a few split services, which are then chosen exactly given the rest.

use tessera_core::SizeCounts;

use super::candidates::{candidates_within, choice_for, Context};
use super::table::{Choice, OptionTable};
use crate::bound::LpBound;
use crate::cover::CoverPricing;
use crate::round::{add_to_share, complete_exactly, purify, Candidate, Share};

/// Most mixes per service and model a split service chooses from in the
/// rounding.
const ROUNDING_MIXES: usize = 64;

/// Most search nodes of the exact choice for the services the relaxation
/// splits.
const ROUNDING_NODES: u64 = 200_000;

/// The relaxation's solution made whole: its support's choices per service,
/// purified down to a few split services, which [`complete_exactly`]
/// settles given the rest.
pub(super) fn round_relaxation(
    context: &Context<'_>,
    pricing: &CoverPricing,
    relaxation: &LpBound,
    table: &mut OptionTable,
) -> Vec<Choice> {
    let services = context.request.services.len();
    let mut shares: Vec<Share<(usize, SizeCounts)>> = vec![Vec::new(); services];
    for (prices, weight) in &relaxation.support {
        for (share, choice) in shares.iter_mut().zip(pricing.choices(context.space, prices)) {
            if let Some(choice) = choice {
                add_to_share(share, choice, *weight);
            }
        }
    }
    purify(context.space, &mut shares, |_, choice| choice);
    let mut fixed = vec![SizeCounts::EMPTY; context.models.len()];
    let mut choice = Vec::with_capacity(services);
    let mut split = Vec::new();
    for (service, share) in shares.iter().enumerate() {
        // The heaviest entry (or the cheapest choice, for an empty share).
        let heaviest = share.iter().max_by(|a, b| a.1.total_cmp(&b.1)).map(|(c, _)| *c);
        let picked = match heaviest {
            Some((model, counts)) => choice_for(context, table, service, model, &counts),
            None => choice_for(context, table, service, 0, &SizeCounts::EMPTY),
        };
        if share.len() > 1 {
            split.push(service);
        } else {
            let mix = &table[picked.model][service].as_ref().expect("chosen options exist").mixes[picked.mix];
            fixed[picked.model] = fixed[picked.model].plus(&mix.counts);
        }
        choice.push(picked);
    }
    if split.is_empty() {
        return choice;
    }
    // Room for plans up to one GPU (or the dearest GPU) above the bound.
    let room = context.models.iter().map(|m| m.cost).fold(0.0, f64::max);
    let mut lists: Vec<Vec<Candidate>> = Vec::with_capacity(split.len());
    for &service in &split {
        let mut list =
            candidates_within(context, table, service, room, ROUNDING_MIXES).map(|(c, _)| c).unwrap_or_default();
        let current = choice[service];
        let counts = table[current.model][service].as_ref().expect("chosen options exist").mixes[current.mix].counts;
        if !list.iter().any(|c| c.model == current.model && c.mix == current.mix) {
            list.push(Candidate { model: current.model, mix: current.mix, counts });
        }
        lists.push(list);
    }
    let open: Vec<&[Candidate]> = lists.iter().map(Vec::as_slice).collect();
    if let Some((picked, _)) =
        complete_exactly(context.models, &fixed, &open, f64::INFINITY, ROUNDING_NODES, context.deadline).best
    {
        for ((&service, list), index) in split.iter().zip(&lists).zip(picked) {
            choice[service] = Choice { model: list[index].model, mix: list[index].mix };
        }
    }
    choice
}
