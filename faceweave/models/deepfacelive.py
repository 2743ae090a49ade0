"""FaceFusion's deep swapper models: DeepFaceLive's DFM files (ONNX
graphs with the ``.dfm`` extension), each trained on one person, which
FaceFusion 3.8.1 offers under ``scope/name`` (``iperov/elon_musk_224``)
and downloads from its Hugging Face repositories ``deepfacelive-models-SCOPE``.

A leaf: the table and the names faceweave files them under (a catalog name
may not hold a ``/``: ``dfm_iperov_elon_musk_224``, file
``dfm_iperov_elon_musk_224.dfm``).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

#: FaceFusion 3.8.1's DeepFaceLive models by scope (the name ends with the model's side in pixels)
DEEPFACELIVE_MODELS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "druuzil": (
            "adam_levine_320",
            "adrianne_palicki_384",
            "agnetha_falskog_224",
            "alan_ritchson_320",
            "alicia_vikander_320",
            "amber_midthunder_320",
            "andras_arato_384",
            "andrew_tate_320",
            "angelina_jolie_384",
            "anne_hathaway_320",
            "anya_chalotra_320",
            "arnold_schwarzenegger_320",
            "benjamin_affleck_320",
            "benjamin_stiller_384",
            "bradley_pitt_224",
            "brie_larson_384",
            "bruce_campbell_384",
            "bryan_cranston_320",
            "catherine_blanchett_352",
            "christian_bale_320",
            "christopher_hemsworth_320",
            "christoph_waltz_384",
            "cillian_murphy_320",
            "cobie_smulders_256",
            "dwayne_johnson_384",
            "edward_norton_320",
            "elisabeth_shue_320",
            "elizabeth_olsen_384",
            "elon_musk_320",
            "emily_blunt_320",
            "emma_stone_384",
            "emma_watson_320",
            "erin_moriarty_384",
            "eva_green_320",
            "ewan_mcgregor_320",
            "florence_pugh_320",
            "freya_allan_320",
            "gary_cole_224",
            "gigi_hadid_224",
            "harrison_ford_384",
            "hayden_christensen_320",
            "heath_ledger_320",
            "henry_cavill_448",
            "hugh_jackman_384",
            "idris_elba_320",
            "jack_nicholson_320",
            "james_carrey_384",
            "james_mcavoy_320",
            "james_varney_320",
            "jason_momoa_320",
            "jason_statham_320",
            "jennifer_connelly_384",
            "jimmy_donaldson_320",
            "jordan_peterson_384",
            "karl_urban_224",
            "kate_beckinsale_384",
            "laurence_fishburne_384",
            "lili_reinhart_320",
            "luke_evans_384",
            "mads_mikkelsen_384",
            "mary_winstead_320",
            "margaret_qualley_384",
            "melina_juergens_320",
            "michael_fassbender_320",
            "michael_fox_320",
            "millie_bobby_brown_320",
            "morgan_freeman_320",
            "patrick_stewart_224",
            "rachel_weisz_384",
            "rebecca_ferguson_320",
            "scarlett_johansson_320",
            "shannen_doherty_384",
            "seth_macfarlane_384",
            "thomas_cruise_320",
            "thomas_hanks_384",
            "william_murray_384",
            "zoe_saldana_384",
        ),
        "edel": (
            "emma_roberts_224",
            "ivanka_trump_224",
            "lize_dzjabrailova_224",
            "sidney_sweeney_224",
            "winona_ryder_224",
        ),
        "iperov": (
            "alexandra_daddario_224",
            "alexei_navalny_224",
            "amber_heard_224",
            "dilraba_dilmurat_224",
            "elon_musk_224",
            "emilia_clarke_224",
            "emma_watson_224",
            "erin_moriarty_224",
            "jackie_chan_224",
            "james_carrey_224",
            "jason_statham_320",
            "keanu_reeves_320",
            "margot_robbie_224",
            "natalie_dormer_224",
            "nicolas_coppola_224",
            "robert_downey_224",
            "rowan_atkinson_224",
            "ryan_reynolds_224",
            "scarlett_johansson_224",
            "sylvester_stallone_224",
            "thomas_cruise_224",
            "thomas_holland_224",
            "vin_diesel_224",
            "vladimir_putin_224",
        ),
        "jen": (
            "angelica_trae_288",
            "ella_freya_224",
            "emma_myers_320",
            "evie_pickerill_224",
            "kang_hyewon_320",
            "maddie_mead_224",
            "nicole_turnbull_288",
        ),
        "mats": (
            "alica_schmidt_320",
            "ashley_alexiss_224",
            "billie_eilish_224",
            "brie_larson_224",
            "cara_delevingne_224",
            "carolin_kebekus_224",
            "chelsea_clinton_224",
            "claire_boucher_224",
            "corinna_kopf_224",
            "florence_pugh_224",
            "hillary_clinton_224",
            "jenna_fischer_224",
            "kim_jisoo_320",
            "mica_suarez_320",
            "shailene_woodley_224",
            "shraddha_kapoor_320",
            "yu_jimin_352",
        ),
        "rumateus": (
            "alison_brie_224",
            "amber_heard_224",
            "angelina_jolie_224",
            "aubrey_plaza_224",
            "bridget_regan_224",
            "cobie_smulders_224",
            "deborah_woll_224",
            "dua_lipa_224",
            "emma_stone_224",
            "hailee_steinfeld_224",
            "hilary_duff_224",
            "jessica_alba_224",
            "jessica_biel_224",
            "john_cena_224",
            "kim_kardashian_224",
            "kristen_bell_224",
            "lucy_liu_224",
            "margot_robbie_224",
            "megan_fox_224",
            "meghan_markle_224",
            "millie_bobby_brown_224",
            "natalie_portman_224",
            "nicki_minaj_224",
            "olivia_wilde_224",
            "shay_mitchell_224",
            "sophie_turner_224",
            "taylor_swift_224",
        ),
    }
)
#: every model as FaceFusion names it, ``scope/name``
DEEP_SWAPPERS: tuple[str, ...] = tuple(
    f"{scope}/{name}" for scope, found in DEEPFACELIVE_MODELS.items() for name in found
)


def catalog_name(model_id: str) -> str:
    """The catalog's name of FaceFusion's ``scope/name`` (``dfm_scope_name``)."""
    return "dfm_" + model_id.replace("/", "_")


def model_side(model_id: str) -> int:
    """The side in pixels of the faces the model takes (the end of its name)."""
    return int(model_id.rsplit("_", 1)[1])
