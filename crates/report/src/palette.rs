//! The colours of services: one palette for every page that draws a plan
//! (`tessera report`, the service's pages, `tessera diff --picture`).
//!
//! The palette is [`SWATCH_COUNT`] light colours spaced evenly in hue on
//! three lightness rings of the OKLab colour space (perceptually uniform,
//! so equal steps look equally different), every one light enough for the
//! tiles' dark text. A service's first choice is a hash of its name
//! (FNV-1a, stable across platforms and releases), so a service keeps its
//! colour from plan to plan and page to page.
//!
//! Services drawn next to each other are neighbours, of two kinds: those
//! that share a GPU (their tiles touch) and those on GPUs next to each
//! other in plan order (side by side in the grid, or one under the other
//! where a row ends). Services sharing a GPU must differ in colour, not
//! only in shade: their [`chromatic_distance`] (ΔE with lightness counted
//! half) is at least [`MIN_SHARING_DISTANCE`]; services on neighbouring
//! GPUs are at least [`MIN_NEIGHBOUR_DISTANCE`] apart in ΔE. Services are
//! coloured greedily — the most neighbours first, ties by name — each
//! taking the first colour in its own name's order that keeps both rules
//! with every neighbour already coloured. A service leaves its first choice
//! only when a neighbour holds a colour too close to it; which colour it
//! takes then depends on its neighbours, not on the order of the plan's
//! lists.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use tessera_core::Plan;

/// How many colours the palette has.
pub const SWATCH_COUNT: usize = 36;

/// The least ΔE (Euclidean distance in OKLab, where 0.02 is about the
/// smallest difference people notice) between the fills of services on
/// GPUs next to each other.
pub const MIN_NEIGHBOUR_DISTANCE: f64 = 0.08;

/// The least [`chromatic_distance`] between the fills of two services that
/// share a GPU: two shades of one hue (a light and a darker blue) are
/// closer than this.
pub const MIN_SHARING_DISTANCE: f64 = 0.08;

/// How many neighbours (of either kind) a service may have with both rules
/// guaranteed: each neighbour's colour rules out at most
/// `SWATCH_COUNT / GUARANTEED_NEIGHBOURS` swatches, fewer than that in
/// fact (a test checks), so one is always left. Beyond it the rules hold in
/// practice: the tests check random plans where services have dozens of
/// neighbours, and the reference plans.
pub const GUARANTEED_NEIGHBOURS: usize = 4;

/// The lightness rings (OKLab L, chroma), palest first.
const RINGS: [(f64, f64); 3] = [(0.88, 0.07), (0.80, 0.11), (0.72, 0.13)];

/// How much darker a service's compute band is than its tiles (OKLab L).
const STRONG_DARKER: f64 = 0.24;

/// One colour of the palette: the tile's fill, the compute band's darker
/// shade, and where the fill sits in OKLab.
#[derive(Debug, Clone, PartialEq)]
pub struct Swatch {
    /// The tile's fill, `#rrggbb`.
    pub fill: String,
    /// The darker shade of the compute band, `#rrggbb`.
    pub strong: String,
    /// The fill in OKLab (L, a, b).
    pub lab: [f64; 3],
}

/// The colour of every service of one or more plans.
#[derive(Debug, Clone)]
pub struct Palette {
    swatches: Vec<Swatch>,
    chosen: HashMap<String, usize>,
}

impl Palette {
    /// The colours of `plan`'s services (those of its service list and of
    /// its instances).
    pub fn of(plan: &Plan) -> Palette {
        Palette::of_plans(&[plan])
    }

    /// The colours of the services of every plan in `plans`, neighbours
    /// in any of them kept apart: a service has one colour in all of them.
    pub fn of_plans(plans: &[&Plan]) -> Palette {
        let swatches = swatches();
        let mut neighbours: BTreeMap<&str, Neighbours<'_>> = BTreeMap::new();
        for plan in plans {
            for report in &plan.services {
                neighbours.entry(report.service.as_str()).or_default();
            }
            for (position, gpu) in plan.gpus.iter().enumerate() {
                let next_to = [position.checked_sub(1), Some(position + 1)];
                let beside: Vec<&str> = next_to
                    .iter()
                    .filter_map(|&other| plan.gpus.get(other?))
                    .flat_map(|other| other.instances.iter().map(|b| b.service.as_str()))
                    .collect();
                for a in &gpu.instances {
                    let entry = neighbours.entry(a.service.as_str()).or_default();
                    entry.sharing.extend(gpu.instances.iter().map(|b| b.service.as_str()).filter(|&b| b != a.service));
                    entry.beside.extend(beside.iter().copied().filter(|&b| b != a.service));
                }
            }
        }
        let mut order: Vec<(&str, &Neighbours<'_>)> = neighbours.iter().map(|(name, n)| (*name, n)).collect();
        order.sort_by(|(a, a_near), (b, b_near)| b_near.count().cmp(&a_near.count()).then(a.cmp(b)));
        let mut chosen: HashMap<String, usize> = HashMap::with_capacity(order.len());
        for (name, near) in order {
            let taken = |set: &BTreeSet<&str>| -> Vec<[f64; 3]> {
                set.iter().filter_map(|neighbour| chosen.get(*neighbour)).map(|&index| swatches[index].lab).collect()
            };
            let (sharing, beside) = (taken(&near.sharing), taken(&near.beside));
            // How well swatch `index` keeps both rules: at least 1 when it
            // keeps them.
            let margin = |index: usize| {
                let lab = &swatches[index].lab;
                let shared = sharing.iter().map(|other| chromatic_distance(lab, other) / MIN_SHARING_DISTANCE);
                let next = beside.iter().map(|other| colour_distance(lab, other) / MIN_NEIGHBOUR_DISTANCE);
                shared.chain(next).fold(f64::INFINITY, f64::min)
            };
            let choices = preference(name);
            let pick = choices
                .clone()
                .find(|&index| margin(index) >= 1.0)
                .or_else(|| choices.max_by(|&a, &b| margin(a).total_cmp(&margin(b))))
                .unwrap_or(0);
            chosen.insert(name.to_string(), pick);
        }
        Palette { swatches, chosen }
    }

    /// The swatch of `service` (a service of none of the plans gets its
    /// name's first choice).
    pub fn swatch(&self, service: &str) -> &Swatch {
        &self.swatches[self.index(service)]
    }

    /// The fill of `service`'s tiles, `#rrggbb`.
    pub fn fill(&self, service: &str) -> &str {
        &self.swatch(service).fill
    }

    /// The darker shade of `service`'s compute band, `#rrggbb`.
    pub fn strong(&self, service: &str) -> &str {
        &self.swatch(service).strong
    }

    /// The position of `service`'s swatch in [`Palette::swatches`].
    pub fn index(&self, service: &str) -> usize {
        self.chosen.get(service).copied().unwrap_or_else(|| first_choice(service))
    }

    /// Every colour of the palette, in a fixed order.
    pub fn swatches(&self) -> &[Swatch] {
        &self.swatches
    }
}

/// A service's neighbours: those sharing one of its GPUs, and those on the
/// GPUs next to its GPUs.
#[derive(Default)]
struct Neighbours<'a> {
    sharing: BTreeSet<&'a str>,
    beside: BTreeSet<&'a str>,
}

impl Neighbours<'_> {
    /// How many neighbours, of both kinds.
    fn count(&self) -> usize {
        self.sharing.len() + self.beside.len()
    }
}

/// ΔE between two OKLab colours with the lightness difference counted
/// half, so that colours differ in hue or chroma, not only in shade.
pub fn chromatic_distance(a: &[f64; 3], b: &[f64; 3]) -> f64 {
    ((0.5 * (a[0] - b[0])).powi(2) + (a[1] - b[1]).powi(2) + (a[2] - b[2]).powi(2)).sqrt()
}

/// ΔE between two OKLab colours.
pub fn colour_distance(a: &[f64; 3], b: &[f64; 3]) -> f64 {
    ((a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2) + (a[2] - b[2]).powi(2)).sqrt()
}

/// FNV-1a of `text`: stable, unlike the standard library's hasher.
fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3))
}

/// The swatch `name` prefers.
fn first_choice(name: &str) -> usize {
    (fnv1a(name) % SWATCH_COUNT as u64) as usize
}

/// Every swatch in `name`'s order of preference: its first choice, then
/// steps of a stride (coprime with the palette's size) its hash picks.
fn preference(name: &str) -> impl Iterator<Item = usize> + Clone {
    const STRIDES: [usize; 6] = [5, 7, 11, 13, 17, 19];
    let hash = fnv1a(name);
    let first = (hash % SWATCH_COUNT as u64) as usize;
    let stride = STRIDES[((hash >> 32) % STRIDES.len() as u64) as usize];
    (0..SWATCH_COUNT).map(move |step| (first + step * stride) % SWATCH_COUNT)
}

/// The palette: on each ring, hues evenly spaced (each ring turned by a
/// fraction of a step so no two rings share a hue), chroma reduced where
/// the colour would leave sRGB.
fn swatches() -> Vec<Swatch> {
    let per_ring = SWATCH_COUNT / RINGS.len();
    let mut out = Vec::with_capacity(SWATCH_COUNT);
    for (ring, &(lightness, chroma)) in RINGS.iter().enumerate() {
        for step in 0..per_ring {
            let hue_deg = (step as f64 + ring as f64 / RINGS.len() as f64) * 360.0 / per_ring as f64 + 20.0;
            let (lab, fill) = in_gamut(lightness, chroma, hue_deg);
            let (_, strong) = in_gamut(lightness - STRONG_DARKER, chroma, hue_deg);
            out.push(Swatch { fill, strong, lab });
        }
    }
    out
}

/// The OKLCH colour (`lightness`, `chroma`, `hue_deg`) as OKLab and hex,
/// its chroma lowered in small steps until it is inside sRGB.
fn in_gamut(lightness: f64, chroma: f64, hue_deg: f64) -> ([f64; 3], String) {
    let mut chroma = chroma;
    loop {
        let (a, b) = (chroma * hue_deg.to_radians().cos(), chroma * hue_deg.to_radians().sin());
        let rgb = oklab_to_linear_srgb(lightness, a, b);
        if rgb.iter().all(|channel| (-1e-9..=1.0 + 1e-9).contains(channel)) || chroma <= 0.0 {
            let hex = rgb.iter().map(|&channel| format!("{:02x}", to_byte(channel))).collect::<String>();
            return ([lightness, a, b], format!("#{hex}"));
        }
        chroma = (chroma - 0.002).max(0.0);
    }
}

/// OKLab to linear sRGB (Björn Ottosson's published matrices).
fn oklab_to_linear_srgb(lightness: f64, a: f64, b: f64) -> [f64; 3] {
    let l = (lightness + 0.396_337_777_4 * a + 0.215_803_757_3 * b).powi(3);
    let m = (lightness - 0.105_561_345_8 * a - 0.063_854_172_8 * b).powi(3);
    let s = (lightness - 0.089_484_177_5 * a - 1.291_485_548 * b).powi(3);
    [
        4.076_741_662_1 * l - 3.307_711_591_3 * m + 0.230_969_929_2 * s,
        -1.268_438_004_6 * l + 2.609_757_401_1 * m - 0.341_319_396_5 * s,
        -0.004_196_086_3 * l - 0.703_418_614_7 * m + 1.707_614_701 * s,
    ]
}

/// A linear sRGB channel as its gamma-encoded byte.
fn to_byte(linear: f64) -> u8 {
    let linear = linear.clamp(0.0, 1.0);
    let encoded = if linear <= 0.003_130_8 { 12.92 * linear } else { 1.055 * linear.powf(1.0 / 2.4) - 0.055 };
    (encoded * 255.0).round() as u8
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::draw::tests::two_gpu_plan;
    use tessera_core::rng::SplitMix64;
    use tessera_core::{GpuAssignment, GpuModel, InstanceAssignment};

    /// WCAG's relative luminance of `#rrggbb`.
    fn luminance(hex: &str) -> f64 {
        let channel = |at: usize| {
            let value = f64::from(u8::from_str_radix(&hex[at..at + 2], 16).unwrap()) / 255.0;
            if value <= 0.040_45 {
                value / 12.92
            } else {
                ((value + 0.055) / 1.055).powf(2.4)
            }
        };
        0.2126 * channel(1) + 0.7152 * channel(3) + 0.0722 * channel(5)
    }

    #[test]
    fn the_swatches_are_distinct_in_gamut_and_readable_under_dark_text() {
        let swatches = swatches();
        assert_eq!(swatches.len(), SWATCH_COUNT);
        let text = luminance("#1a1a1a");
        for (index, swatch) in swatches.iter().enumerate() {
            assert!(swatch.fill.len() == 7 && swatch.fill.starts_with('#'), "{swatch:?}");
            // WCAG AA for normal text: contrast at least 4.5.
            let contrast = (luminance(&swatch.fill) + 0.05) / (text + 0.05);
            assert!(contrast >= 4.5, "swatch {index} {}: contrast {contrast:.1}", swatch.fill);
            assert!(luminance(&swatch.strong) < luminance(&swatch.fill) * 0.6, "{swatch:?}");
            for other in &swatches[index + 1..] {
                assert_ne!(swatch.fill, other.fill);
                assert!(colour_distance(&swatch.lab, &other.lab) > 0.02, "{swatch:?} and {other:?} look alike");
            }
        }
    }

    #[test]
    fn every_service_with_few_enough_neighbours_has_a_distinct_colour_left() {
        // Each neighbour's colour rules out at most `blocked` swatches
        // (its own included), so GUARANTEED_NEIGHBOURS neighbours rule out
        // fewer than all of them.
        let swatches = swatches();
        let blocked = |distance: fn(&[f64; 3], &[f64; 3]) -> f64, least: f64| {
            swatches.iter().map(|a| swatches.iter().filter(|b| distance(&a.lab, &b.lab) < least).count()).max().unwrap()
        };
        let sharing = blocked(chromatic_distance, MIN_SHARING_DISTANCE);
        let beside = blocked(colour_distance, MIN_NEIGHBOUR_DISTANCE);
        assert!(beside <= sharing && sharing * GUARANTEED_NEIGHBOURS < SWATCH_COUNT, "{sharing}, {beside}");
        // Two shades of one hue count as close when sharing a GPU.
        let (pale, mid) = (&swatches[0].lab, &swatches[SWATCH_COUNT / 3].lab);
        assert!(chromatic_distance(pale, mid) < MIN_SHARING_DISTANCE, "{pale:?} {mid:?}");
    }

    fn instance(service: &str, start: u8) -> InstanceAssignment {
        InstanceAssignment {
            profile: "1g.10gb".to_string(),
            size: 1,
            start,
            service: service.to_string(),
            model: "m".to_string(),
            batch: 1,
            procs: 1,
            throughput_rps: 1.0,
            latency_ms: 1.0,
            capacity_rps: None,
        }
    }

    /// `gpus` A100s each holding 1 to 4 of `services` services drawn at
    /// random; every service appears somewhere.
    fn random_plan(services: usize, gpus: usize, seed: u64) -> Plan {
        let mut rng = SplitMix64::new(seed);
        let mut next = 0;
        let gpus = (0..gpus)
            .map(|position| {
                let held = 1 + rng.below(4);
                let instances = (0..held)
                    .map(|slot| {
                        // Walk through every service once, then at random.
                        let service = if next < services { next } else { rng.below(services) };
                        next += 1;
                        instance(&format!("svc-{service}"), slot as u8)
                    })
                    .collect();
                GpuAssignment {
                    node: position as u32 / 8,
                    index: position as u32 % 8,
                    gpu_model: GpuModel::A100_80GB,
                    instances,
                    shared: Vec::new(),
                }
            })
            .collect();
        Plan::from_gpus(gpus, "optimal", "parva", 8)
    }

    /// The least chromatic distance between two services sharing a GPU of
    /// `plan`, and the least ΔE between services on GPUs next to each other.
    fn closest_neighbours(plan: &Plan, palette: &Palette) -> (f64, f64) {
        let (mut sharing, mut beside) = (f64::INFINITY, f64::INFINITY);
        let lab = |service: &str| palette.swatch(service).lab;
        for (position, gpu) in plan.gpus.iter().enumerate() {
            let next = plan.gpus.get(position + 1).map_or(&[][..], |next| &next.instances[..]);
            for a in &gpu.instances {
                for b in gpu.instances.iter().filter(|b| b.service != a.service) {
                    sharing = sharing.min(chromatic_distance(&lab(&a.service), &lab(&b.service)));
                }
                for b in next.iter().filter(|b| b.service != a.service) {
                    beside = beside.min(colour_distance(&lab(&a.service), &lab(&b.service)));
                }
            }
        }
        (sharing, beside)
    }

    #[test]
    fn services_drawn_next_to_each_other_are_kept_apart() {
        // 3,000 services on 2,000 GPUs of 1 to 4 instances: half the
        // services have ten neighbours or more, some forty.
        for seed in 1..=3 {
            let plan = random_plan(3_000, 2_000, seed);
            let palette = Palette::of(&plan);
            let (sharing, beside) = closest_neighbours(&plan, &palette);
            assert!(sharing >= MIN_SHARING_DISTANCE, "seed {seed}: sharing a GPU {sharing:.3} apart");
            assert!(beside >= MIN_NEIGHBOUR_DISTANCE, "seed {seed}: on GPUs side by side {beside:.3} apart");
        }
    }

    #[test]
    fn a_service_keeps_its_colour_whatever_the_order_of_the_plan() {
        let plan = random_plan(300, 200, 7);
        let palette = Palette::of(&plan);
        let mut shuffled = plan.clone();
        shuffled.gpus.reverse();
        for gpu in &mut shuffled.gpus {
            gpu.instances.reverse();
        }
        let again = Palette::of(&shuffled);
        for gpu in &plan.gpus {
            for instance in &gpu.instances {
                assert_eq!(palette.fill(&instance.service), again.fill(&instance.service), "{}", instance.service);
            }
        }
        // Even with about ten neighbours each, many services keep their
        // name's first choice.
        let first =
            (0..300).filter(|i| palette.index(&format!("svc-{i}")) == first_choice(&format!("svc-{i}"))).count();
        assert!(first > 100, "{first} of 300 at their first choice");
    }

    #[test]
    fn a_service_alone_gets_its_names_colour_in_every_plan() {
        let plan = two_gpu_plan();
        let palette = Palette::of(&plan);
        // The long name is alone on its GPU, with no neighbour to avoid.
        assert_eq!(palette.index("a-service-with-a-long-name"), first_choice("a-service-with-a-long-name"));
        assert_eq!(Palette::of(&random_plan(10, 5, 1)).index("elsewhere"), first_choice("elsewhere"));
        assert_eq!(fnv1a(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a("a"), 0xaf63_dc4c_8601_ec8c, "FNV-1a's published value");
        let order: Vec<usize> = preference("search").collect();
        let mut sorted = order.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..SWATCH_COUNT).collect::<Vec<_>>(), "every swatch once");
    }
}
