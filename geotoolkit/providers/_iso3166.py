"""ISO 3166-1 country codes: alpha-3 to alpha-2, for providers that answer in alpha-3.

HERE (``address.countryCode``), ArcGIS (``Country``) and Pelias (``country_a``) name
countries with three letters; ``Place.country_code`` is always alpha-2, upper case.
The table is the ISO 3166-1 list (249 codes) plus ``XKX`` -> ``XK`` (Kosovo, a
user-assigned code used by several providers).
"""

from __future__ import annotations

from types import MappingProxyType

__all__ = ["ALPHA3_TO_ALPHA2", "country_code"]

# alpha-3 then alpha-2, pair after pair, in the order of the ISO list.
_TABLE = """
AFG AF ALA AX ALB AL DZA DZ ASM AS AND AD AGO AO AIA AI ATA AQ ATG AG ARG AR ARM AM ABW AW
AUS AU AUT AT AZE AZ BHS BS BHR BH BGD BD BRB BB BLR BY BEL BE BLZ BZ BEN BJ BMU BM BTN BT
BOL BO BES BQ BIH BA BWA BW BVT BV BRA BR IOT IO BRN BN BGR BG BFA BF BDI BI CPV CV KHM KH
CMR CM CAN CA CYM KY CAF CF TCD TD CHL CL CHN CN CXR CX CCK CC COL CO COM KM COG CG COD CD
COK CK CRI CR CIV CI HRV HR CUB CU CUW CW CYP CY CZE CZ DNK DK DJI DJ DMA DM DOM DO ECU EC
EGY EG SLV SV GNQ GQ ERI ER EST EE SWZ SZ ETH ET FLK FK FRO FO FJI FJ FIN FI FRA FR GUF GF
PYF PF ATF TF GAB GA GMB GM GEO GE DEU DE GHA GH GIB GI GRC GR GRL GL GRD GD GLP GP GUM GU
GTM GT GGY GG GIN GN GNB GW GUY GY HTI HT HMD HM VAT VA HND HN HKG HK HUN HU ISL IS IND IN
IDN ID IRN IR IRQ IQ IRL IE IMN IM ISR IL ITA IT JAM JM JPN JP JEY JE JOR JO KAZ KZ KEN KE
KIR KI PRK KP KOR KR KWT KW KGZ KG LAO LA LVA LV LBN LB LSO LS LBR LR LBY LY LIE LI LTU LT
LUX LU MAC MO MDG MG MWI MW MYS MY MDV MV MLI ML MLT MT MHL MH MTQ MQ MRT MR MUS MU MYT YT
MEX MX FSM FM MDA MD MCO MC MNG MN MNE ME MSR MS MAR MA MOZ MZ MMR MM NAM NA NRU NR NPL NP
NLD NL NCL NC NZL NZ NIC NI NER NE NGA NG NIU NU NFK NF MKD MK MNP MP NOR NO OMN OM PAK PK
PLW PW PSE PS PAN PA PNG PG PRY PY PER PE PHL PH PCN PN POL PL PRT PT PRI PR QAT QA REU RE
ROU RO RUS RU RWA RW BLM BL SHN SH KNA KN LCA LC MAF MF SPM PM VCT VC WSM WS SMR SM STP ST
SAU SA SEN SN SRB RS SYC SC SLE SL SGP SG SXM SX SVK SK SVN SI SLB SB SOM SO ZAF ZA SGS GS
SSD SS ESP ES LKA LK SDN SD SUR SR SJM SJ SWE SE CHE CH SYR SY TWN TW TJK TJ TZA TZ THA TH
TLS TL TGO TG TKL TK TON TO TTO TT TUN TN TUR TR TKM TM TCA TC TUV TV UGA UG UKR UA ARE AE
GBR GB USA US UMI UM URY UY UZB UZ VUT VU VEN VE VNM VN VGB VG VIR VI WLF WF ESH EH YEM YE
ZMB ZM ZWE ZW XKX XK
"""
_PAIRS = _TABLE.split()

#: ISO 3166-1 alpha-3 -> alpha-2 (read-only).
ALPHA3_TO_ALPHA2 = MappingProxyType(dict(zip(_PAIRS[::2], _PAIRS[1::2], strict=True)))
_ALPHA2 = frozenset(ALPHA3_TO_ALPHA2.values())


def country_code(value: object) -> str | None:
    """An ISO alpha-2 code, upper case, from an alpha-2 or alpha-3 code; ``None`` otherwise.

    >>> country_code("no"), country_code("NOR"), country_code("Norway"), country_code(47)
    ('NO', 'NO', None, None)
    """
    if not isinstance(value, str):
        return None
    code = value.strip().upper()
    if len(code) == 3:
        return ALPHA3_TO_ALPHA2.get(code)
    return code if code in _ALPHA2 else None
